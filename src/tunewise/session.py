"""The tuning loop: the only place that proposes, measures and records.

Each iteration is one *slot*: the scheduler picks a task from a frozen :class:`~tunewise.state.Snapshot`,
that task's MetaSchedule search (evolutionary search guided by the shared cost model) proposes a batch of
candidates, the :class:`~tunewise.measure.Measurer` builds and measures them, and every trial is recorded at
once: in the MetaSchedule database (which seeds later searches and compilation) and in the trial log.

Budgets (:class:`Budget`) end the run: total trials, wall-clock time, trials per task, and per-task patience
(a task is finished after that many trials without improvement). A task is also finished when its search
space is exhausted. Failed candidates count against the budgets and are reported separately.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tunewise.errors import InputError
from tunewise.measure import Measurement
from tunewise.state import Snapshot, TaskView


@dataclass(frozen=True)
class Budget:
    """When to stop. ``None`` leaves a limit unset; at least one of the run-wide limits must be set."""

    max_trials: int | None = None
    time_budget: float | None = None  # seconds of wall-clock time
    per_task_trials: int | None = None
    patience: int | None = None  # finish a task after this many trials without improvement

    def __post_init__(self):
        for name in ("max_trials", "time_budget", "per_task_trials", "patience"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)
                                      or not math.isfinite(value) or value <= 0):
                raise InputError(f"budget {name.replace('_', '-')} must be a positive number, got {value!r}")
        if self.max_trials is None and self.time_budget is None and self.per_task_trials is None:
            raise InputError("set a budget: trials, time or trials per task")


@dataclass(frozen=True)
class Trial:
    """One measured candidate, as recorded (``record`` is MetaSchedule's JSON of its tuning record)."""

    task: int
    task_name: str
    slot: int
    record: list
    run_secs: tuple[float, ...]
    error: str | None
    message: str
    build_seconds: float
    run_seconds: float
    timestamp: float

    @property
    def latency(self) -> float:
        return sum(self.run_secs) / len(self.run_secs) if self.run_secs else math.inf


@dataclass(frozen=True)
class SlotEvent:
    """What one slot did, sent to listeners after it is recorded."""

    slot: int
    task: int
    trials: int
    failures: int
    best_before: float
    best_after: float
    seconds: float  # the whole slot: search + measure + record + model update
    search_seconds: float
    measure_seconds: float
    decision_seconds: float


@dataclass
class _TaskProgress:
    best_history: list[float] = field(default_factory=list)
    trials_history: list[int] = field(default_factory=list)
    trials: int = 0
    failures: int = 0
    since_improvement: int = 0
    finished: bool = False

    @property
    def best(self) -> float:
        return self.best_history[-1] if self.best_history else math.inf


class _TaskSearch:
    """One task's MetaSchedule search, prepared lazily on the task's first slot.

    The evolutionary search costs about the same per call whatever the batch size (it evolves a population
    of 512 either way), so it is asked for ``batch`` candidates at a time, as the stock loop does, and slots
    take their candidates from that queue. The search strategy is told each slot's results at once; the
    cost model is updated with the whole batch once it has been measured, again as in the stock loop.
    """

    def __init__(self, mod, name: str, target, seed: int, num_threads: int, batch: int):
        self.mod, self.name, self.target = mod, name, target
        self.seed, self.num_threads, self.batch = seed, num_threads, batch
        self.context = None
        self._queue: list = []
        self._measured: list = []
        self._results: list = []

    def propose(self, n: int, database, cost_model, max_trials: int) -> list:
        """Up to ``n`` unmeasured candidates; an empty list when the search space is exhausted."""
        from tvm.s_tir import meta_schedule as ms

        if self.context is None:
            self.context = ms.TuneContext(
                self.mod, target=self.target, space_generator="post-order-apply",
                search_strategy="evolutionary", task_name=self.name, rand_state=self.seed,
                num_threads=self.num_threads, logger=ms.logging.get_logger("tunewise.search"),
            ).clone()
            self.context.pre_tuning(max_trials, self.batch, self.context.generate_design_space(), database,
                                    cost_model)
        if not self._queue:
            self._queue = list(self.context.generate_measure_candidates() or [])
        taken, self._queue = self._queue[:n], self._queue[n:]
        return taken

    def notify(self, candidates, results, cost_model) -> None:
        self.context.notify_runner_results(candidates, results)
        self._measured += candidates
        self._results += results
        if not self._queue:
            cost_model.update(self.context, self._measured, self._results)
            self._measured, self._results = [], []


class Session:
    """Tunes an :class:`~tunewise.tasks.ExtractedModel` under a budget with a task scheduler.

    ``database`` is a MetaSchedule database (records are committed to it as they are measured);
    ``trial_log`` an open text file that receives one JSON line per trial, flushed at once.
    ``listeners`` are called as ``listener(event, snapshot)`` after every slot.
    """

    def __init__(self, model, scheduler, budget: Budget, measurer, database, *, trials_per_slot: int = 16,
                 search_batch: int = 64, cost_model=None, seed: int = 0, trial_log=None,
                 listeners: list[Callable[[SlotEvent, Snapshot], None]] | None = None):
        from tvm.s_tir import meta_schedule as ms

        if trials_per_slot <= 0:
            raise InputError(f"trials per slot must be positive, got {trials_per_slot}")
        self.model = model
        self.scheduler = scheduler
        self.budget = budget
        self.measurer = measurer
        self.database = database
        self.trials_per_slot = trials_per_slot
        num_threads = int(model.target.attrs["num-cores"]) if "num-cores" in model.target.attrs else 1
        self.cost_model = cost_model or ms.CostModel.create("xgb", num_tuning_cores=num_threads)
        self.trial_log = trial_log
        self.listeners = list(listeners or [])
        self.trials: list[Trial] = []
        self.history: list[tuple[float, float]] = []
        self.decision_seconds = 0.0
        self._progress = [_TaskProgress() for _ in model.tasks]
        self._searches = [_TaskSearch(m, t.name, model.target, seed + i + 1, num_threads,
                                      max(search_batch, trials_per_slot))
                          for i, (t, m) in enumerate(zip(model.tasks, model.task_mods, strict=True))]
        self._workloads = {}
        self._start = None
        self._slot = 0

    # -- state -------------------------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        return 0.0 if self._start is None else time.perf_counter() - self._start

    def snapshot(self) -> Snapshot:
        views = tuple(
            TaskView(i, t.name, t.weight, t.flops, t.default_latency, tuple(p.best_history),
                     tuple(p.trials_history), p.trials, p.failures, p.finished)
            for i, (t, p) in enumerate(zip(self.model.tasks, self._progress, strict=True))
        )
        return Snapshot(views, self.elapsed, len(self.trials), self._slot, self.trials_per_slot,
                        self.budget.max_trials, self.budget.per_task_trials, tuple(self.history))

    def _out_of_budget(self) -> bool:
        b = self.budget
        return ((b.max_trials is not None and len(self.trials) >= b.max_trials)
                or (b.time_budget is not None and self.elapsed >= b.time_budget))

    def _slot_size(self, progress: _TaskProgress) -> int:
        n = self.trials_per_slot
        if self.budget.max_trials is not None:
            n = min(n, self.budget.max_trials - len(self.trials))
        if self.budget.per_task_trials is not None:
            n = min(n, self.budget.per_task_trials - progress.trials)
        return n

    # -- acting ------------------------------------------------------------------------------------------
    def run(self) -> Snapshot:
        """Tune until a budget is spent, the scheduler stops, or every task is finished."""
        self._start = time.perf_counter()
        self.history.append((0.0, self.snapshot().estimated_latency()))
        while not self._out_of_budget():
            snapshot = self.snapshot()
            if not snapshot.live:
                break
            tick = time.perf_counter()
            choice = self.scheduler.next(snapshot)
            decision = time.perf_counter() - tick
            self.decision_seconds += decision
            if choice is None:
                break
            if snapshot.tasks[choice].finished:
                raise RuntimeError(f"scheduler {self.scheduler!r} chose finished task {choice}")
            self._run_slot(choice, decision)
        return self.snapshot()

    def _run_slot(self, k: int, decision_seconds: float) -> None:
        from tvm.s_tir import meta_schedule as ms

        progress, search = self._progress[k], self._searches[k]
        n = self._slot_size(progress)
        slot_start = time.perf_counter()
        max_trials = self.budget.per_task_trials or self.budget.max_trials or 1_000_000
        candidates = search.propose(n, self.database, self.cost_model, max_trials) if n > 0 else []
        search_seconds = time.perf_counter() - slot_start
        best_before = progress.best
        if not candidates:
            progress.finished = True  # space exhausted (or no room left under the per-task budget)
            return
        measure_start = time.perf_counter()
        measurements = self.measurer.measure([(c.sch.mod, c.args_info) for c in candidates])
        measure_seconds = time.perf_counter() - measure_start
        results = [ms.runner.RunnerResult(list(m.run_secs) if not m.error else None,
                                          None if not m.error else f"{m.error}: {m.message}")
                   for m in measurements]
        self._record(k, candidates, measurements)
        search.notify(candidates, results, self.cost_model)
        self._finish_slot(k, measurements, best_before)
        event = SlotEvent(self._slot, k, len(candidates), sum(m.error is not None for m in measurements),
                          best_before, progress.best, time.perf_counter() - slot_start, search_seconds,
                          measure_seconds, decision_seconds)
        self._slot += 1
        snapshot = self.snapshot()
        self.history.append((snapshot.elapsed, snapshot.estimated_latency()))
        for listener in self.listeners:
            listener(event, self.snapshot())

    def _record(self, k: int, candidates, measurements: list[Measurement]) -> None:
        from tvm.s_tir import meta_schedule as ms

        task = self.model.tasks[k]
        if k not in self._workloads:
            self._workloads[k] = self.database.commit_workload(self.model.task_mods[k])
        now = time.time()
        for candidate, m in zip(candidates, measurements, strict=True):
            record = ms.database.TuningRecord(candidate.sch.trace, self._workloads[k],
                                              list(m.run_secs) if m.run_secs else None,
                                              self.model.target, candidate.args_info)
            self.database.commit_tuning_record(record)
            trial = Trial(k, task.name, self._slot, record.as_json(), m.run_secs, m.error, m.message,
                          m.build_seconds, m.run_seconds, now)
            self.trials.append(trial)
            if self.trial_log is not None:
                self.trial_log.write(json.dumps(trial.__dict__) + "\n")
        if self.trial_log is not None:
            self.trial_log.flush()

    def _finish_slot(self, k: int, measurements: list[Measurement], best_before: float) -> None:
        progress = self._progress[k]
        best = min([best_before, *(m.latency for m in measurements)])
        progress.trials += len(measurements)
        progress.failures += sum(m.error is not None for m in measurements)
        progress.since_improvement = 0 if best < best_before else progress.since_improvement + len(measurements)
        progress.best_history.append(best)
        progress.trials_history.append(progress.trials)
        b = self.budget
        if ((b.per_task_trials is not None and progress.trials >= b.per_task_trials)
                or (b.patience is not None and progress.since_improvement >= b.patience)):
            progress.finished = True
