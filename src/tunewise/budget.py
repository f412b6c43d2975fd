"""A run's limits: total trials, tuning time, trials per task, patience, and whether failures count."""

from __future__ import annotations

from dataclasses import dataclass

from tunewise._numbers import is_positive
from tunewise.errors import InputError


@dataclass(frozen=True)
class Budget:
    """When to stop. ``None`` leaves a limit unset. A run that measures must be :attr:`bounded`; without any
    limit, a replay goes on until every recorded trial is used.

    ``count_failures`` false leaves failed candidates out of ``max_trials`` (they still cost time and count
    against the other limits). It is true by default, so that a trial budget bounds what the run measures.
    """

    max_trials: int | None = None
    time_budget: float | None = None  # seconds of tuning time
    per_task_trials: int | None = None
    patience: int | None = None  # finish a task after this many trials without improvement
    count_failures: bool = True

    def __post_init__(self):
        if not isinstance(self.count_failures, bool):
            raise InputError(f"budget count-failures must be true or false, got {self.count_failures!r}")
        for name in ("max_trials", "time_budget", "per_task_trials", "patience"):
            value = getattr(self, name)
            if value is not None and not is_positive(value):
                raise InputError(f"budget {name.replace('_', '-')} must be a positive number, got {value!r}")

    @property
    def bounded(self) -> bool:
        """Whether a run-wide limit is set: total trials, time, or trials per task."""
        return self.max_trials is not None or self.time_budget is not None or self.per_task_trials is not None
