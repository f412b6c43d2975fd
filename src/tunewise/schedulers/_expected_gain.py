"""The expected-gain scheduler: the slot goes where it is expected to take the most model latency per second."""

from __future__ import annotations

import math

import numpy as np

from tunewise.schedulers._base import TaskScheduler
from tunewise.schedulers._prior import heaviest_first
from tunewise.tuning.ledger import slot_size
from tunewise.tuning.state import Snapshot, TaskView


class ExpectedGain(TaskScheduler):
    """Greedy on the expected model-latency gain per second of each live task's next slot.

    The run's first slot goes to the heaviest task untuned; then the highest score gets it (ties to the earliest):

    - a tried task (``n`` trials, a slot of ``m``) is expected to remove ``weight * current_latency *
      (1 - (n / (n + m)) ** exponent)``: one power law in trials for every task;
    - an untried task, its untuned time less ``flops / G`` (``G`` the ``reference_quantile`` of the tried tasks'
      throughputs; a task without FLOPs sheds the tried tasks' median fraction, ``layout_shed`` before any);
      a task whose untuned schedule failed scores infinity;
    - the gain is divided by the slot's expected seconds (:meth:`slot_seconds`), learnt from the run's slot
      durations by position in the task's run; without durations every slot costs the same.

    Deterministic; a decision is one pass over the tasks (evidence: bench/studies/schedulers/findings.md).
    """

    def __init__(self, *, exponent: float = 0.15, reference_quantile: float = 0.75, layout_shed: float = 0.25,
                 cost_prior_slots: float = 2.0):
        if not exponent > 0:
            raise ValueError(f"exponent must be > 0, got {exponent!r}")
        if not 0.0 <= reference_quantile <= 1.0:
            raise ValueError(f"reference_quantile must be in [0, 1], got {reference_quantile!r}")
        if not 0.0 <= layout_shed <= 1.0:
            raise ValueError(f"layout_shed must be in [0, 1], got {layout_shed!r}")
        if not cost_prior_slots >= 0:
            raise ValueError(f"cost_prior_slots must be >= 0, got {cost_prior_slots!r}")
        self.exponent = exponent
        self.reference_quantile = reference_quantile
        self.layout_shed = layout_shed
        self.cost_prior_slots = cost_prior_slots

    def next(self, snapshot: Snapshot) -> int | None:
        live = snapshot.live
        if not live:
            return None
        if not any(t.slots for t in snapshot.tasks):
            return heaviest_first(live)[0].index
        rates = self.rates(snapshot)
        return max(live, key=lambda t: (rates[t.index], -t.index)).index

    def rates(self, snapshot: Snapshot) -> dict[int, float]:
        """Each live task's expected model-latency gain (seconds) per second of its next slot."""
        seconds = self.slot_seconds(snapshot)
        return {t.index: self.expected_gain(snapshot, t) / seconds[t.index] for t in snapshot.live}

    def expected_gain(self, snapshot: Snapshot, task: TaskView) -> float:
        """The model latency (seconds) ``task``'s next slot is expected to remove."""
        if task.slots == 0:
            return self._first_gain(snapshot, task)
        if not math.isfinite(task.current_latency):  # tried, nothing valid, and its untuned schedule failed
            return 0.0
        n, m = task.trials, slot_size(snapshot, task)
        if n <= 0 or m <= 0:
            return 0.0
        return task.weight * task.current_latency * (1.0 - (n / (n + m)) ** self.exponent)

    def _first_gain(self, snapshot: Snapshot, task: TaskView) -> float:
        if not math.isfinite(task.default_latency):
            return math.inf
        if task.flops > 0:
            speeds = [t.gflops for t in snapshot.tasks if t.gflops > 0]
            if not speeds:
                return task.weight * task.default_latency
            after = task.flops / (1e9 * float(np.quantile(speeds, self.reference_quantile)))
            return task.weight * max(task.default_latency - after, 0.0)
        shed = [1.0 - t.current_latency / t.default_latency for t in snapshot.tasks
                if t.flops <= 0 and math.isfinite(t.best) and 0 < t.default_latency < math.inf]
        fraction = float(np.median(shed)) if shed else self.layout_shed
        return task.weight * task.default_latency * max(fraction, 0.0)

    def slot_seconds(self, snapshot: Snapshot) -> dict[int, float]:
        """Each task's expected seconds for its next slot: the mean duration of the slots at that position (a
        task's ``j``-th) over all tasks that had one (the mean of all slots past the longest task), times the
        task's own factor, the mean ratio of its slots' durations to their positions' means, shrunk towards 1
        by ``cost_prior_slots`` pseudo-slots. All 1 when the snapshot has no slot durations."""
        durations = snapshot.slot_seconds()
        spent = [s for task in durations for s in task]
        if not spent or not sum(spent) > 0:
            return {t.index: 1.0 for t in snapshot.tasks}
        mean = sum(spent) / len(spent)
        at = [float(np.mean([d[j] for d in durations if len(d) > j])) for j in range(max(map(len, durations)))]
        out = {}
        for task, own in zip(snapshot.tasks, durations, strict=True):
            ratios = [s / at[j] for j, s in enumerate(own) if at[j] > 0]
            factor = (sum(ratios) + self.cost_prior_slots) / (len(ratios) + self.cost_prior_slots) if ratios else 1.0
            out[task.index] = max((at[len(own)] if len(own) < len(at) else mean) * factor, 1e-9 * mean)
        return out
