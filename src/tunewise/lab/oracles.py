"""Hindsight references for task schedulers on recorded traces: what the best choices would have been.

Research tools, not schedulers one can run: they read the trials to come from a
:class:`~tunewise.lab.replay.Trace`. An oracle has a scheduler's ``next(snapshot)``, so
:func:`tunewise.lab.replay.replay`
can drive it, but it is no :class:`~tunewise.schedulers.TaskScheduler`: its choices depend on the future, not
only on the snapshots it was shown. :func:`fastest_allocation` is the lower bound no scheduler can beat.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tunewise._numbers import is_whole
from tunewise.lab.replay import TaskRun, Trace, TraceTask
from tunewise.tuning.ledger import slot_size
from tunewise.tuning.state import Snapshot, TaskView


class Oracle:
    """DynaTune's hindsight oracle (Wang et al., ICLR 2021, s. 4.1 and fig. 7) on one seed of a trace.

    Not a scheduler one can run: it reads the trials to come from ``trace.runs[seed_index]``, to show how
    far from the best choices a real scheduler is. For each live task it takes the trials its next slot
    would get in :func:`replay` (same size rule), and the task's *rate*: the model-latency reduction those
    trials bring, ``weight * (current_latency - min(current_latency, best of them))``, per second of their
    recorded cost. With ``lookahead=m`` a task's score is its best rate over its next ``1..m`` slots (the
    trials of ``j`` slots of that size, the reduction and the cost of all of them); ``lookahead=1`` is the
    paper's one-step greedy, ``None`` looks any number of slots ahead. The task with the highest score gets
    the slot. Ties, above all "no next slot improves anything", go to the best rate over any number of
    slots ahead, then to the earliest declared task, so the oracle does not spend time on a task that has
    nothing left to find. A zero-cost slot with a reduction has an infinite rate.

    Greedy in hindsight is not optimal (choosing slots is a knapsack), only a strong reference.
    """

    def __init__(self, *, trace: Trace, seed_index: int, lookahead: int | None = 1):
        if lookahead is not None and (not is_whole(lookahead) or lookahead < 1):
            raise ValueError(f"lookahead must be an integer >= 1 or None, got {lookahead!r}")
        self.trace = trace
        self.seed_index = seed_index
        self.lookahead = lookahead
        runs = trace.runs[seed_index]
        self._latencies = [np.array(r.latencies, dtype=float) for r in runs]
        self._costs = [np.array(r.costs, dtype=float) for r in runs]

    def __repr__(self) -> str:
        return f"Oracle(trace={self.trace.model!r}, seed_index={self.seed_index}, lookahead={self.lookahead})"

    def rates(self, snapshot: Snapshot, task: TaskView) -> np.ndarray:
        """``task``'s rate (model-latency reduction per second) over its next ``1, 2, ...`` slots, up to
        the end of its recorded run or its per-task budget."""
        gain, cost = _next_slots(self._latencies[task.index], self._costs[task.index], snapshot, task)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(gain > 0, gain / cost, 0.0)

    def next(self, snapshot: Snapshot) -> int | None:
        live = snapshot.live
        if not live:
            return None
        scores = []
        for task in live:
            rate = self.rates(snapshot, task)
            scores.append((float(rate[: self.lookahead].max()), float(rate.max())))
        return live[max(range(len(live)), key=lambda i: scores[i])].index


class OtherSeedsOracle(Oracle):
    """The :class:`Oracle` with a perfect belief instead of foresight: it scores a task's next slots by what
    they brought, at the same trial positions, in the trace's *other* seeds, never in the replayed one.

    A task's rate over its next ``j`` slots is the mean over the other seeds of the model-latency reduction
    their trials at those positions would bring from where the replayed run stands, over the mean of their
    recorded costs. That is what a scheduler would do if its learning-curve model knew each task's curve
    in distribution (as well as the other seeds sample it) but not this run's luck; how far it is from the
    :class:`Oracle` shows how much of the oracle's lead a better belief could win, and how much takes
    foresight. Needs a trace with at least two seeds.
    """

    def __init__(self, *, trace: Trace, seed_index: int, lookahead: int | None = 1):
        if trace.seeds < 2:
            raise ValueError(f"{trace.model}: the other-seeds oracle needs at least 2 seeds, the trace has "
                             f"{trace.seeds}")
        super().__init__(trace=trace, seed_index=seed_index, lookahead=lookahead)
        others = [s for s in range(trace.seeds) if s != seed_index]
        self._other_latencies = [[np.array(trace.runs[s][k].latencies, dtype=float) for s in others]
                                 for k in range(len(trace.tasks))]
        self._other_costs = [[np.array(trace.runs[s][k].costs, dtype=float) for s in others]
                             for k in range(len(trace.tasks))]

    def __repr__(self) -> str:
        return (f"OtherSeedsOracle(trace={self.trace.model!r}, seed_index={self.seed_index}, "
                f"lookahead={self.lookahead})")

    def rates(self, snapshot: Snapshot, task: TaskView) -> np.ndarray:
        slots = _next_slots(self._latencies[task.index], self._costs[task.index], snapshot, task)[0].size
        gains, costs = [], []
        for latencies, run_costs in zip(self._other_latencies[task.index], self._other_costs[task.index],
                                        strict=True):
            gain, cost = _next_slots(latencies, run_costs, snapshot, task)
            gains.append(_pad(gain, slots))
            costs.append(_pad(cost, slots))
        gain, cost = np.mean(gains, axis=0), np.mean(costs, axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((gain > 0) & (cost > 0), gain / cost, 0.0)


def _next_slots(latencies: np.ndarray, costs: np.ndarray, snapshot: Snapshot,
                task: TaskView) -> tuple[np.ndarray, np.ndarray]:
    """The model-latency reduction and the cost of ``task``'s next ``1, 2, ...`` slots if they took the
    trials at its next positions in ``latencies`` / ``costs`` (one recorded run), up to the run's end or the
    per-task budget; ``([0], [0])`` when there is no next slot."""
    n = slot_size(snapshot, task)
    end = len(latencies)
    if snapshot.per_task_trials is not None:
        end = min(end, snapshot.per_task_trials)
    latencies, costs = latencies[task.trials:end], costs[task.trials:end]
    if n <= 0 or latencies.size == 0:
        return np.zeros(1), np.zeros(1)
    stops = np.minimum(np.arange(n, latencies.size + n, n), latencies.size) - 1
    current = task.current_latency
    gain = task.weight * (current - np.minimum(current, np.minimum.accumulate(latencies)[stops]))
    return gain, np.cumsum(costs)[stops]


def _pad(x: np.ndarray, size: int) -> np.ndarray:
    """``x`` cut or extended to ``size`` entries by repeating its last (a run that ended brings no more)."""
    return x[:size] if x.size >= size else np.append(x, np.full(size - x.size, x[-1]))


@dataclass(frozen=True)
class Allocation:
    """Trials per task (each a prefix of the task's recorded run), what they cost in recorded seconds, and
    the model latency they reach."""

    trials: tuple[int, ...]
    seconds: float
    latency: float


def fastest_allocation(trace: Trace, goal: float, *, seed_index: int, trials_per_slot: int = 16) -> Allocation | None:
    """The cheapest way to bring the model latency down to ``goal`` on ``trace.runs[seed_index]``, in hindsight.

    A scheduler in :func:`replay` can only hold, after each slot, a prefix of every task's recorded run made
    of whole slots (``trials_per_slot`` trials, fewer at the run's end), and it reaches ``goal`` no sooner
    than the recorded cost of such prefixes whose model latency is at most ``goal``. This finds the cheapest
    of them exactly, so its ``seconds`` is a lower bound on any scheduler's :func:`time_to_reach` (without
    a budget that cuts a slot short, and before the scheduler's own decision time), oracles included: the
    most any scheduler could gain. ``None`` if even every recorded trial does not reach ``goal``.

    Choosing prefixes is a multiple-choice knapsack; it is solved by merging the tasks' (cost, latency)
    choices one task at a time and keeping only the Pareto front, less the points that cannot reach
    ``goal`` even if every task still to come got its best recorded trial.
    """
    if trials_per_slot <= 0:
        raise ValueError(f"trials_per_slot must be positive, got {trials_per_slot}")
    choices = [_prefix_choices(t, r, trials_per_slot) for t, r in zip(trace.tasks, trace.runs[seed_index], strict=True)]
    floor_after = np.cumsum([min(latency) for _, _, latency in choices][::-1])[::-1]  # best of tasks k.. at once
    floor_after = np.append(floor_after, 0.0)
    cost, latency = np.zeros(1), np.zeros(1)
    picks = np.zeros((1, 0), dtype=int)
    for k, (trials, c, lat) in enumerate(choices):
        cost = (cost[:, None] + c[None, :]).ravel()
        latency = (latency[:, None] + lat[None, :]).ravel()
        picks = np.concatenate([np.repeat(picks, len(trials), axis=0),
                                np.tile(trials, len(picks))[:, None]], axis=1)
        keep = latency + floor_after[k + 1] <= goal
        order = np.lexsort((latency[keep], cost[keep]))
        cost, latency, picks = cost[keep][order], latency[keep][order], picks[keep][order]
        front = latency < np.minimum.accumulate(np.append(np.inf, latency))[:-1]
        cost, latency, picks = cost[front], latency[front], picks[front]
        if cost.size == 0:
            return None
    return Allocation(tuple(int(n) for n in picks[0]), float(cost[0]), float(latency[0]))


def _prefix_choices(task: TraceTask, run: TaskRun, trials_per_slot: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A task's choices in :func:`fastest_allocation`: trials after 0, 1, 2... whole slots, their recorded
    cost, and the weighted latency the task then has."""
    n = len(run.latencies)
    trials = np.unique(np.minimum(np.arange(0, n + trials_per_slot, trials_per_slot), n))
    cost = np.concatenate([[0.0], np.cumsum(run.costs)])[trials]
    best = np.minimum.accumulate(np.concatenate([[task.default_latency], run.latencies]))[trials]
    return trials, cost, task.weight * best
