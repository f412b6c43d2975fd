"""Every model its fair share: the baseline a suspension policy is measured against."""

from __future__ import annotations

from collections.abc import Sequence

from tunewise.populations._base import ModelView, PopulationPolicy


class FairShare(PopulationPolicy):
    """The unfinished models that have cost least so far tune next (ties in fleet order): with the capacity
    for every model, all tune at once; with less, they take turns, and none is ever held back for paying
    off less than the others.

    >>> FairShare().select([ModelView("a", ((0.0, 1.0), (60.0, 0.5))), ModelView("b")], capacity=1)
    (1,)
    """

    def select(self, models: Sequence[ModelView], capacity: int) -> tuple[int, ...]:
        unfinished = [i for i, m in enumerate(models) if not m.finished]
        return tuple(sorted(unfinished, key=lambda i: (models[i].cost, i))[:capacity])
