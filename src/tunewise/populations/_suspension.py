"""Trimmer's population-based suspension: the models that pay off most tune, the others wait."""

from __future__ import annotations

from collections.abc import Sequence

from tunewise.populations._base import ModelView, PopulationPolicy


class Suspension(PopulationPolicy):
    """After every round, rank the unfinished models by their latest improvement per unit of cost
    (:attr:`ModelView.rate`) and let the best ``capacity`` of them tune; the rest are suspended (Trimmer's
    multi-model tuning, Borowiec et al., IEEE CLOUD 2022, s. IV-D).

    A suspended model keeps the rate of its last round while the running ones are re-rated, so it comes back as
    soon as they stall below it, or when one finishes. Models that have not tuned yet rank first (rate ``inf``);
    ties go to the model that has cost least, then to fleet order.

    >>> fast = ModelView("fast", ((0.0, 1.0), (60.0, 0.5)))
    >>> slow = ModelView("slow", ((0.0, 1.0), (60.0, 0.95)))
    >>> Suspension().plan([fast, slow], capacity=1)
    Round(run=(0,), suspend=(1,), resume=())
    """

    def select(self, models: Sequence[ModelView], capacity: int) -> tuple[int, ...]:
        unfinished = [i for i, m in enumerate(models) if not m.finished]
        return tuple(sorted(unfinished, key=lambda i: (-models[i].rate, models[i].cost, i))[:capacity])
