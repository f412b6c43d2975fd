"""Trace replay: task schedulers compared on recorded tuning, in seconds instead of hours, without TVM. A
:class:`Trace` holds a model's tasks (name, weight, FLOPs, default latency) and, for each of a few seeds,
every task tuned *alone*: each trial's measured latency (``inf`` for a failure) and its cost, the wall-clock
seconds it took including its share of the search, the build and the run. :func:`replay` simulates
:class:`tunewise.tuning.session.Session` with any scheduler: a slot of task ``k`` takes the next trials of
``k``'s recorded run, so every scheduler faces the same outcomes. What it cannot show: in a real run the tasks
share one cost model; in the traces each task was tuned with a cost model of its own.

>>> from tunewise.lab.synthetic import synthetic
>>> from tunewise.schedulers import RoundRobin
>>> trace = synthetic(n_tasks=3, trials=64, seeds=1, seed=0)
>>> run = replay(trace, RoundRobin(), seed_index=0, decision_cost=0.0)
>>> run.final.trials, len(run.picks), run.history[-1][1] < run.history[0][1]
(192, 12, True)
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field

from tunewise import infinity
from tunewise.budget import Budget
from tunewise.tuning.estimate import model_latency
from tunewise.tuning.ledger import Ledger
from tunewise.tuning.state import Snapshot

_FORMAT = 1


@dataclass(frozen=True)
class TraceTask:
    """A task's static facts, as :class:`tunewise.lowering.tasks.Task` has them (latency in seconds, ``inf`` when
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

    def to_json(self) -> dict:
        """The run as JSON (``inf`` as ``null``); :meth:`from_json` reads it back."""
        return {"latencies": [infinity.to_json(x) for x in self.latencies], "costs": list(self.costs)}

    @classmethod
    def from_json(cls, data: dict) -> TaskRun:
        return cls(tuple(infinity.from_json(x) for x in data["latencies"]), tuple(data["costs"]))


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
        return model_latency((t.weight, t.default_latency, min(r.latencies, default=math.inf))
                             for t, r in zip(self.tasks, self.runs[seed_index], strict=True))

    def save(self, path: str) -> None:
        """Write the trace as gzip-compressed JSON (``inf`` stored as ``null``); :meth:`load` reads it back."""
        data = {"format": _FORMAT, "model": self.model, "meta": self.meta,
                "tasks": [{"name": t.name, "weight": t.weight, "flops": t.flops,
                           "default_latency": infinity.to_json(t.default_latency)} for t in self.tasks],
                "runs": [[r.to_json() for r in runs] for runs in self.runs]}
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump(data, f, separators=(",", ":"))

    @classmethod
    def load(cls, path: str) -> Trace:
        """The trace :meth:`save` wrote to ``path``."""
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        if data.get("format") != _FORMAT:
            raise ValueError(f"{path}: trace format {data.get('format')!r}, expected {_FORMAT}")
        tasks = tuple(TraceTask(t["name"], t["weight"], t["flops"], infinity.from_json(t["default_latency"]))
                      for t in data["tasks"])
        runs = tuple(tuple(TaskRun.from_json(r) for r in runs) for runs in data["runs"])
        return cls(data["model"], tasks, runs, data["meta"])


@dataclass(frozen=True)
class Replay:
    """What a replay did: the model-latency curve ``history`` (``(elapsed s, sum(weight * min(best,
    default)))`` at the start and after every slot, as :attr:`tunewise.tuning.session.Session.history`), the task
    of every slot, the seconds each decision was charged, the last snapshot, and the reason of the stop rule
    that ended it (``None`` when none did)."""

    history: tuple[tuple[float, float], ...]
    picks: tuple[int, ...]
    decision_times: tuple[float, ...]
    final: Snapshot
    stopped_by: str | None = None


class TraceRun:
    """One replayed run, advanced a slot at a time: the core that :func:`replay` loops over, and that a driver of
    several runs (:mod:`tunewise.lab.fleet`) interleaves.

    Takes :func:`replay`'s arguments, its limits as one :class:`~tunewise.budget.Budget` (none by default), and a
    ``forecaster`` (:class:`~tunewise.forecast.Forecaster`) that forecasts the run after every slot, as a
    session does (the snapshots carry the forecasts; none by default).
    Each :meth:`step` charges the scheduler's decision and runs one slot on the run's own simulated clock
    (:attr:`elapsed`), and returns ``False`` once the run is over.
    """

    def __init__(self, trace: Trace, scheduler, *, seed_index: int, trials_per_slot: int = 16,
                 budget: Budget | None = None, decision_cost: float | None = None, stoppers=(),
                 watts: float | None = None, forecaster=None):
        if trials_per_slot <= 0:
            raise ValueError(f"trials_per_slot must be positive, got {trials_per_slot}")
        self.trace, self.runs, self.decision_cost = trace, trace.runs[seed_index], decision_cost
        self.elapsed = 0.0  # the run's simulated tuning seconds
        self.ledger = Ledger(trace.tasks, scheduler, budget or Budget(), trials_per_slot=trials_per_slot,
                             clock=lambda: self.elapsed,
                             exhausted=[k for k, run in enumerate(self.runs) if not run.latencies],
                             stoppers=stoppers, joules=None if watts is None else (lambda: watts * self.elapsed),
                             forecaster=forecaster)
        self.picks: list[int] = []
        self.decision_times: list[float] = []
        self.over = False
        self._used = [0] * len(trace.tasks)

    def step(self) -> bool:
        """Run the next slot; ``False`` (and nothing more happens) once the run is over."""
        if self.over:
            return False
        asked = self.ledger.decisions
        slot = self.ledger.ask()
        decision = 0.0
        if self.ledger.decisions > asked:
            decision = self.ledger.last_decision if self.decision_cost is None else self.decision_cost
            self.elapsed += decision
        if slot is None:
            self.over = True
            return False
        run, start = self.runs[slot.task], self._used[slot.task]
        latencies, costs = run.latencies[start:start + slot.n], run.costs[start:start + slot.n]
        self.elapsed += sum(costs)
        self._used[slot.task] += len(latencies)
        self.ledger.tell(slot, latencies, exhausted=self._used[slot.task] >= len(run.latencies))
        self.picks.append(slot.task)
        self.decision_times.append(decision)
        return True

    def result(self) -> Replay:
        """What the run did so far."""
        return Replay(tuple(self.ledger.history), tuple(self.picks), tuple(self.decision_times),
                      self.ledger.snapshot(), self.ledger.stopped_by)


def replay(trace: Trace, scheduler, *, seed_index: int, trials_per_slot: int = 16, budget: Budget | None = None,
           decision_cost: float | None = None, stoppers=(), watts: float | None = None) -> Replay:
    """Simulate :meth:`tunewise.tuning.session.Session.run` on ``trace.runs[seed_index]`` with ``scheduler``
    (anything with a :class:`~tunewise.schedulers.TaskScheduler`'s ``next(snapshot)``) under ``budget`` (none:
    until every recorded trial is used).

    The rules are the session's :class:`~tunewise.tuning.ledger.Ledger`, told each slot's recorded trials, taken
    in order from the task's run; a task is also finished once its recorded run is used up. Unlike the session,
    a slot is never shrunk to fit a time limit (the estimate at a budget is the curve's last point before it).
    The clock advances by the decision time (measured, or ``decision_cost`` seconds a decision: ``0.0`` makes
    the replay deterministic), then by the trials' recorded costs. ``stoppers`` (:mod:`tunewise.stoppers`) are
    asked before every slot; the run's joules are ``watts`` times its simulated seconds (``None``: unknown, and
    an energy budget raises :class:`~tunewise.errors.InputError`). Raises ``RuntimeError`` if the scheduler
    chooses a finished task.
    """
    run = TraceRun(trace, scheduler, seed_index=seed_index, trials_per_slot=trials_per_slot,
                   budget=budget, decision_cost=decision_cost,
                   stoppers=stoppers, watts=watts)
    while run.step():
        pass
    return run.result()


def time_to_reach(history, goal: float) -> float | None:
    """The first elapsed time at which the model latency in ``history`` (``(elapsed, latency)`` pairs, in
    time order) is at most ``goal``; ``None`` if it never is."""
    return next((t for t, latency in history if latency <= goal), None)


def time_to_within(history, best: float, fraction: float) -> float | None:
    """:func:`time_to_reach` the goal ``(1 + fraction) * best``: ``fraction=0.05`` is "within 5 %"."""
    return time_to_reach(history, (1.0 + fraction) * best)
