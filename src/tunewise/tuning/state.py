"""Frozen views of a tuning run: what schedulers and stop rules decide from.

A :class:`Snapshot` is an immutable value built by the session after every slot. It holds, per task, the
static facts (weight, FLOPs, default latency) and what tuning has found so far (best latency after each
of the task's slots, trials and failures used, whether the task is finished, and, under selective tuning,
the representative whose schedules it is given instead of being searched), plus the run-wide counters and
the whole-model latencies a driver measured. :class:`Cost` is what the run has spent so far.
Nothing in here touches TVM, so every decision made from a snapshot can be tested and replayed without it.

Latencies are in seconds; ``math.inf`` means "no valid measurement yet".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tunewise.tuning.estimate import calibrated_latency, model_latency, task_latency

if TYPE_CHECKING:
    from tunewise.forecast._result import Forecast


@dataclass(frozen=True)
class TaskView:
    """One task as a scheduler sees it.

    ``best_history[i]`` is the task's best measured latency after its ``i``-th slot (so it is
    non-increasing, ``inf`` until a candidate ran), ``trials_history[i]`` the task's trials after it and
    ``slot_numbers[i]`` the run's number of that slot; ``trial_bests[j]`` is its best latency after its
    ``j``-th trial.
    ``source`` is the task whose best schedules it is given instead of being searched (selective tuning,
    :mod:`tunewise.sharing`), ``None`` when it is searched.
    """

    index: int
    name: str
    weight: int
    flops: float
    default_latency: float
    best_history: tuple[float, ...] = ()
    trials_history: tuple[int, ...] = ()
    trials: int = 0
    failures: int = 0
    finished: bool = False
    source: int | None = None
    slot_numbers: tuple[int, ...] = ()
    trial_bests: tuple[float, ...] = ()

    @property
    def slots(self) -> int:
        """How many slots this task has had."""
        return len(self.best_history)

    @property
    def best(self) -> float:
        """Best measured latency so far (``inf`` when none is valid)."""
        return self.best_history[-1] if self.best_history else math.inf

    @property
    def current_latency(self) -> float:
        """The latency this task contributes now: its best, or its default latency while untuned."""
        return task_latency(self.default_latency, self.best)

    @property
    def gflops(self) -> float:
        """Throughput of the best measured schedule (0 while none is valid)."""
        return self.flops / self.best / 1e9 if math.isfinite(self.best) and self.best > 0 else 0.0


@dataclass(frozen=True)
class Snapshot:
    """The whole run at one instant: tasks, counters and the budget they are measured against.

    ``per_task_trials`` and ``max_trials`` are ``None`` when that budget is not set. ``measured`` holds the
    whole-model latencies the driver measured (:meth:`tunewise.tuning.ledger.Ledger.tell_model_latency`), in time
    order; empty while none was. ``forecast`` is the forecast the ledger made after the latest slot
    (:mod:`tunewise.forecast`; ``None`` when it makes none, or had nothing to forecast from).
    """

    tasks: tuple[TaskView, ...]
    elapsed: float = 0.0
    trials: int = 0
    slot: int = 0
    trials_per_slot: int = 16
    max_trials: int | None = None
    per_task_trials: int | None = None
    history: tuple[tuple[float, float], ...] = field(default=())  # (elapsed s, estimated model latency s)
    measured: tuple[tuple[float, float], ...] = field(default=())  # (elapsed s, measured model latency s)
    forecast: Forecast | None = None

    @property
    def live(self) -> tuple[TaskView, ...]:
        """Tasks a scheduler may still choose: unfinished, and searched rather than given another task's
        schedules."""
        return tuple(t for t in self.tasks if not t.finished and t.source is None)

    def estimated_latency(self) -> float:
        """Model latency estimate: the weighted sum of each task's current latency."""
        return model_latency((t.weight, t.default_latency, t.best) for t in self.tasks)

    def calibrated_latency(self) -> float:
        """The estimate brought to what the latest whole-model check measured
        (:func:`tunewise.tuning.estimate.calibrated_latency`); the estimate itself before a check."""
        return calibrated_latency(self.estimated_latency(), self.history, self.measured)

    def slot_seconds(self) -> tuple[tuple[float, ...], ...]:
        """Each task's slot durations (seconds, in its slot order), read off :attr:`history`: the told slots
        in slot-number order are its points after the first, each slot lasting from the point before it to its
        own. All empty when the history does not have one point per told slot (a snapshot built by hand)."""
        slots = sorted((number, t.index) for t in self.tasks for number in t.slot_numbers)
        durations: list[list[float]] = [[] for _ in self.tasks]
        if len(self.history) != len(slots) + 1:
            return tuple(() for _ in self.tasks)
        for (_, task), (before, _), (after, _) in zip(slots, self.history[:-1], self.history[1:], strict=True):
            durations[task].append(after - before)
        return tuple(tuple(d) for d in durations)

    def untuned_latency(self) -> float:
        """Model latency estimate before tuning: the weighted sum of the default latencies (``inf`` while one
        is unknown or failed)."""
        return model_latency((t.weight, t.default_latency, math.inf) for t in self.tasks)


@dataclass(frozen=True)
class Cost:
    """What a run has spent so far: tuning ``seconds``, ``trials`` measured, and ``joules`` of energy (``None``
    when the driver does not meter energy)."""

    seconds: float = 0.0
    trials: int = 0
    joules: float | None = None
