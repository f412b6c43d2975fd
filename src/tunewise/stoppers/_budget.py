"""Stop once the run has spent its time, energy or trials."""

from __future__ import annotations

from tunewise.errors import InputError
from tunewise.stoppers._base import StopRule, positive
from tunewise.tuning.state import Cost, Snapshot


class CostBudget(StopRule):
    """End the run once it has spent ``seconds`` of tuning time, ``joules`` of energy or ``trials`` trials
    (Trimmer's cost budget, IEEE CLOUD 2022, s. IV-C). Each limit left ``None`` is not checked; one must be set.

    Checked before each slot; the last slot runs whole and may overshoot by its own cost. An energy limit needs
    a driver that meters energy (:mod:`tunewise.energy`); without one, :meth:`check` raises
    :class:`~tunewise.errors.InputError`.

    >>> from tunewise.tuning.state import Cost, Snapshot
    >>> budget = CostBudget(joules=50e3)
    >>> budget.check(Snapshot(()), Cost(seconds=60.0, joules=12e3)) is None
    True
    >>> budget.check(Snapshot(()), Cost(seconds=300.0, joules=51e3))
    'energy budget 5e+04 J spent: 5.1e+04 J'
    """

    def __init__(self, *, seconds: float | None = None, joules: float | None = None, trials: int | None = None):
        if seconds is None and joules is None and trials is None:
            raise ValueError("set at least one of seconds, joules, trials")
        for name, value in (("seconds", seconds), ("joules", joules)):
            if value is not None:
                positive(name, value)
        if trials is not None:
            positive("trials", trials, integer=True)
        self.seconds = seconds
        self.joules = joules
        self.trials = trials

    def check(self, snapshot: Snapshot, cost: Cost) -> str | None:
        if self.seconds is not None and cost.seconds >= self.seconds:
            return f"time budget {self.seconds:.4g} s spent: {cost.seconds:.4g} s"
        if self.trials is not None and cost.trials >= self.trials:
            return f"trial budget {self.trials} spent: {cost.trials} trials"
        if self.joules is not None:
            if cost.joules is None:
                raise InputError("an energy budget needs the run's energy, and this run is not metered")
            if cost.joules >= self.joules:
                return f"energy budget {self.joules:.4g} J spent: {cost.joules:.4g} J"
        return None
