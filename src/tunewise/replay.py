"""Trace replay: task schedulers compared on recorded tuning, in seconds instead of hours, without TVM.

A :class:`Trace` holds a model's tasks (name, weight, FLOPs, default latency) and, for each of a few seeds,
every task tuned *alone*: each trial's measured latency (``inf`` for a failure) and its cost, the wall-clock
seconds it took including its share of the search, the build and the run. :func:`replay` simulates
:class:`tunewise.session.Session` with any scheduler: a slot given to task ``k`` takes the next trials of
``k``'s recorded run, and the clock advances by their recorded costs plus the scheduler's own decision time.
A task's trials do not depend on when its slots come, so every scheduler faces the same outcomes.

What a replay cannot show: in a real run the tasks share one cost model, so a task's search may gain from
the others' measurements; in the traces each task was tuned with a cost model of its own.

>>> trace = synthetic(n_tasks=3, trials=64, seeds=1, seed=0)
>>> from tunewise.schedulers import RoundRobin
>>> run = replay(trace, RoundRobin(), seed_index=0, decision_cost=0.0)
>>> run.final.trials, len(run.picks), run.history[-1][1] < run.history[0][1]
(192, 12, True)
"""

from __future__ import annotations

import gzip
import json
import math
import time
from dataclasses import dataclass, field

import numpy as np

from tunewise.schedulers import TaskScheduler
from tunewise.state import Snapshot, TaskView

_FORMAT = 1


@dataclass(frozen=True)
class TraceTask:
    """A task's static facts, as :class:`tunewise.tasks.Task` has them (latency in seconds, ``inf`` when
    the untuned schedule failed)."""

    name: str
    weight: int
    flops: float
    default_latency: float


@dataclass(frozen=True)
class TaskRun:
    """One task tuned alone: trial ``i`` measured ``latencies[i]`` seconds (``inf``: it failed) and cost
    ``costs[i]`` seconds of wall-clock time."""

    latencies: tuple[float, ...]
    costs: tuple[float, ...]

    def __post_init__(self):
        if len(self.latencies) != len(self.costs):
            raise ValueError(f"{len(self.latencies)} latencies but {len(self.costs)} costs")
        if not all(x > 0 for x in self.latencies):
            raise ValueError("latencies must be > 0 (inf for a failed trial)")
        if not all(0 <= c < math.inf for c in self.costs):
            raise ValueError("costs must be finite and >= 0")


@dataclass(frozen=True)
class Trace:
    """A model's tasks and ``runs[seed_index][task]``: each task tuned alone with each recorded seed.

    ``meta`` says how it was recorded (target, trials per task, slot size, date): free-form, kept as is.
    """

    model: str
    tasks: tuple[TraceTask, ...]
    runs: tuple[tuple[TaskRun, ...], ...]
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        for i, runs in enumerate(self.runs):
            if len(runs) != len(self.tasks):
                raise ValueError(f"seed index {i}: {len(runs)} task runs for {len(self.tasks)} tasks")

    @property
    def seeds(self) -> int:
        return len(self.runs)

    def best_reachable(self, seed_index: int) -> float:
        """The model latency once every task has its best recorded trial: ``sum(weight * min(default,
        best))`` over the tasks (seconds)."""
        return sum(t.weight * min([t.default_latency, *r.latencies])
                   for t, r in zip(self.tasks, self.runs[seed_index], strict=True))

    def save(self, path: str) -> None:
        """Write the trace as gzip-compressed JSON (``inf`` stored as ``null``); :meth:`load` reads it back."""
        data = {"format": _FORMAT, "model": self.model, "meta": self.meta,
                "tasks": [{"name": t.name, "weight": t.weight, "flops": t.flops,
                           "default_latency": _to_json(t.default_latency)} for t in self.tasks],
                "runs": [[{"latencies": [_to_json(x) for x in r.latencies], "costs": list(r.costs)} for r in runs]
                         for runs in self.runs]}
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump(data, f, separators=(",", ":"))

    @classmethod
    def load(cls, path: str) -> Trace:
        """The trace :meth:`save` wrote to ``path``."""
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        if data.get("format") != _FORMAT:
            raise ValueError(f"{path}: trace format {data.get('format')!r}, expected {_FORMAT}")
        tasks = tuple(TraceTask(t["name"], t["weight"], t["flops"], _from_json(t["default_latency"]))
                      for t in data["tasks"])
        runs = tuple(tuple(TaskRun(tuple(_from_json(x) for x in r["latencies"]), tuple(r["costs"])) for r in runs)
                     for runs in data["runs"])
        return cls(data["model"], tasks, runs, data["meta"])


def _to_json(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _from_json(x: float | None) -> float:
    return math.inf if x is None else float(x)


@dataclass(frozen=True)
class Replay:
    """What a replay did: the model-latency curve ``history`` (``(elapsed s, sum(weight * min(best,
    default)))`` at the start and after every slot, as :attr:`tunewise.session.Session.history`), the task
    of every slot, the seconds each decision was charged, and the last snapshot."""

    history: tuple[tuple[float, float], ...]
    picks: tuple[int, ...]
    decision_times: tuple[float, ...]
    final: Snapshot


def replay(trace: Trace, scheduler: TaskScheduler, *, seed_index: int, trials_per_slot: int = 16,
           max_trials: int | None = None, time_budget: float | None = None, per_task_trials: int | None = None,
           patience: int | None = None, decision_cost: float | None = None) -> Replay:
    """Simulate :meth:`tunewise.session.Session.run` on ``trace.runs[seed_index]`` with ``scheduler``.

    The rules are the session's, but for one: under a time limit the session also shrinks or skips a slot that
    the durations of earlier slots say would overrun it (:class:`tunewise.timebudget.SlotPace`), where the
    replay runs it whole; the estimate at a budget is then the curve's last point at or before it (what
    ``bench/short_budgets.py`` reads). Before every slot the run stops once ``max_trials`` trials are used or
    the clock reached ``time_budget`` (a slot is never cut short), or when no task is live or the scheduler
    returns ``None``. The scheduler sees a :class:`~tunewise.state.Snapshot` built as the session builds
    it; the chosen task gets ``min(trials_per_slot, trials left under max_trials, trials left under
    per_task_trials)`` trials, taken in order from its recorded run (fewer at the run's end), and then has
    one more ``best_history`` / ``trials_history`` entry. A task is finished after the slot that spends its
    ``per_task_trials``, that ends ``patience`` trials without improvement (counted as the session counts
    them), or that uses up its recorded run; a task with an empty run is finished from the start.

    The clock advances by the scheduler's decision time, then by the recorded costs of the slot's trials.
    The decision time is measured (``time.perf_counter`` around :meth:`~TaskScheduler.next`) unless
    ``decision_cost`` gives the seconds to charge per decision instead (``0.0`` leaves the scheduler's
    overhead out, and makes the replay deterministic). With no budget at all, the run goes on until every
    recorded trial is used. Raises ``RuntimeError`` if the scheduler chooses a finished task.
    """
    if trials_per_slot <= 0:
        raise ValueError(f"trials_per_slot must be positive, got {trials_per_slot}")
    runs = trace.runs[seed_index]
    best: list[list[float]] = [[] for _ in trace.tasks]
    trials_after: list[list[int]] = [[] for _ in trace.tasks]
    used = [0] * len(trace.tasks)
    failures = [0] * len(trace.tasks)
    since_improvement = [0] * len(trace.tasks)
    finished = [not r.latencies for r in runs]
    clock, total, slot = 0.0, 0, 0
    history: list[tuple[float, float]] = []
    picks: list[int] = []
    decisions: list[float] = []

    def snapshot() -> Snapshot:
        views = tuple(TaskView(i, t.name, t.weight, t.flops, t.default_latency, tuple(best[i]),
                               tuple(trials_after[i]), used[i], failures[i], finished[i])
                      for i, t in enumerate(trace.tasks))
        return Snapshot(views, clock, total, slot, trials_per_slot, max_trials, per_task_trials, tuple(history))

    history.append((0.0, snapshot().estimated_latency()))
    while not ((max_trials is not None and total >= max_trials) or (time_budget is not None and clock >= time_budget)):
        snap = snapshot()
        if not snap.live:
            break
        tick = time.perf_counter()
        k = scheduler.next(snap)
        decision = time.perf_counter() - tick if decision_cost is None else decision_cost
        clock += decision
        if k is None:
            break
        if finished[k]:
            raise RuntimeError(f"scheduler {scheduler!r} chose finished task {k}")
        start, n = used[k], _slot_size(snap, snap.tasks[k])
        latencies, costs = runs[k].latencies[start:start + n], runs[k].costs[start:start + n]
        before = best[k][-1] if best[k] else math.inf
        after = min([before, *latencies])
        clock += sum(costs)
        used[k] += len(latencies)
        total += len(latencies)
        failures[k] += sum(1 for x in latencies if x == math.inf)
        since_improvement[k] = 0 if after < before else since_improvement[k] + len(latencies)
        best[k].append(after)
        trials_after[k].append(used[k])
        finished[k] = ((per_task_trials is not None and used[k] >= per_task_trials)
                       or (patience is not None and since_improvement[k] >= patience)
                       or used[k] >= len(runs[k].latencies))
        slot += 1
        picks.append(k)
        decisions.append(decision)
        history.append((clock, snapshot().estimated_latency()))
    return Replay(tuple(history), tuple(picks), tuple(decisions), snapshot())


def _slot_size(snapshot: Snapshot, task: TaskView) -> int:
    """Trials the session gives ``task``'s next slot (before the end of its recorded run)."""
    n = snapshot.trials_per_slot
    if snapshot.max_trials is not None:
        n = min(n, snapshot.max_trials - snapshot.trials)
    if snapshot.per_task_trials is not None:
        n = min(n, snapshot.per_task_trials - task.trials)
    return n


class Oracle(TaskScheduler):
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
        if lookahead is not None and (isinstance(lookahead, bool) or not isinstance(lookahead, int)
                                      or lookahead < 1):
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
    n = _slot_size(snapshot, task)
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


def time_to_reach(history, goal: float) -> float | None:
    """The first elapsed time at which the model latency in ``history`` (``(elapsed, latency)`` pairs, in
    time order) is at most ``goal``; ``None`` if it never is."""
    return next((t for t, latency in history if latency <= goal), None)


def time_to_within(history, best: float, fraction: float) -> float | None:
    """:func:`time_to_reach` the goal ``(1 + fraction) * best``: ``fraction=0.05`` is "within 5 %"."""
    return time_to_reach(history, (1.0 + fraction) * best)


def synthetic(*, n_tasks: int, trials: int, seeds: int, seed: int = 0) -> Trace:
    """A made-up trace with the shape of real ones, for tests and overhead benchmarks.

    Task ``k`` has FLOPs ``10^U(7, 9.5)``, a weight in 1..3, an untuned throughput of ``U(1, 5)`` GFLOPS and
    a best-so-far curve that climbs from there to a ``10^U(0.5, 1.3)`` times higher level, half-way at trial
    ``10^U(1, 2.2)``, with a steepness ``U(0.8, 2)``; some tasks jump by half again at a random trial. Each
    trial lands at ``exp(-|N(0, 0.25)|)`` times the curve, fails with a per-task probability up to 15 %,
    and costs ``U(0.2, 1)`` seconds (per task) times ``lognormal(0, 0.3)``. The tasks come from ``seed``,
    the trials of seed index ``s`` from ``(seed, s)``.
    """
    rng = np.random.default_rng(seed)
    x = np.arange(1, trials + 1, dtype=float)
    tasks, curves, fail, cost = [], [], [], []
    for k in range(n_tasks):
        flops = 10 ** rng.uniform(7, 9.5)
        start = rng.uniform(1, 5)
        top = start * 10 ** rng.uniform(0.5, 1.3)
        half, steep = 10 ** rng.uniform(1, 2.2), rng.uniform(0.8, 2.0)
        curve = start + (top - start) / (1 + (half / x) ** steep)
        if rng.random() < 0.3:
            curve = np.where(x >= rng.integers(1, trials + 1), 1.5 * curve, curve)
        tasks.append(TraceTask(f"task{k}", int(rng.integers(1, 4)), float(flops), float(flops / (start * 1e9))))
        curves.append(curve)
        fail.append(rng.uniform(0, 0.15))
        cost.append(rng.uniform(0.2, 1.0))
    runs = []
    for s in range(seeds):
        trial_rng = np.random.default_rng([seed, s])
        runs.append(tuple(
            TaskRun(tuple(float(v) for v in np.where(trial_rng.random(trials) < f, math.inf,
                                                     t.flops / (c * np.exp(-np.abs(trial_rng.normal(0, 0.25, trials)))
                                                                * 1e9))),
                    tuple(float(v) for v in b * trial_rng.lognormal(0, 0.3, trials)))
            for t, c, f, b in zip(tasks, curves, fail, cost, strict=True)))
    return Trace("synthetic", tuple(tasks), tuple(runs), {"synthetic": {"seed": seed, "trials": trials}})
