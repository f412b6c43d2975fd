"""The rules of a tuning run, free of TVM: which task's slot comes next, how many trials it gets, when a task
and the whole run are finished, and what the run has found so far. A :class:`Ledger` is driven by *ask* and
*tell*, one slot at a time::

    while (slot := ledger.ask()) is not None:
        latencies = measure(slot.task, slot.n)   # propose and measure up to slot.n candidates
        ledger.tell(slot, latencies)             # seconds each; inf for a failure; [] for an exhausted space

Every driver tells the same ledger, so no rule exists twice: :class:`tunewise.tuning.session.Session` measures
for real, a resumed run tells it the slots the store holds (:meth:`Ledger.restore`), and
:func:`tunewise.lab.replay.replay` tells it recorded trials on a simulated clock. :meth:`Ledger.ask` says when
the run is over and how large a slot is, :meth:`Ledger.tell` when a task is finished; the scheduler sees a frozen
:class:`~tunewise.tuning.state.Snapshot` before every slot, resumed slots included, and must not choose a
finished task (``RuntimeError``).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from tunewise import stoppers as stop_rules
from tunewise.budget import Budget
from tunewise.errors import InputError
from tunewise.sharing import Members
from tunewise.tuning.state import Cost, Snapshot, TaskView
from tunewise.tuning.timebudget import SlotPace


def slot_size(snapshot: Snapshot, task: TaskView) -> int:
    """Trials the next slot of ``task`` gets: ``trials_per_slot``, fewer when the run's or the task's trial
    budget has fewer left."""
    n = snapshot.trials_per_slot
    if snapshot.max_trials is not None:
        n = min(n, snapshot.max_trials - snapshot.trials)
    if snapshot.per_task_trials is not None:
        n = min(n, snapshot.per_task_trials - task.trials)
    return n


@dataclass(frozen=True)
class Restored:
    """What :meth:`Ledger.restore` told the ledger of a stored run: its ``trials`` (in the order told), its
    tuning time ``elapsed`` and energy ``joules`` (slots and whole-model checks, 0 where unmetered), and its
    whole-model ``checks`` (:class:`~tunewise.stores.ModelLatency`)."""

    trials: tuple
    elapsed: float
    joules: float
    checks: tuple


@dataclass(frozen=True)
class Slot:
    """A slot the ledger handed out: slot number ``index`` goes to task ``task`` with ``n`` trials;
    ``decision_seconds`` is what the scheduler's choice took. ``source`` is set for a transfer slot: the task
    whose best records ``task`` is given (selective tuning)."""

    index: int
    task: int
    n: int
    decision_seconds: float = 0.0
    source: int | None = None


@dataclass(frozen=True, kw_only=True)
class Pacing:
    """How a driver paces a run's slots beyond its budget: ``seconds_left(snapshot)``, a further time limit
    (a whole command's deadline; ``None``: none); ``pace`` (:class:`~tunewise.tuning.timebudget.SlotPace`),
    which sizes slots under a time limit; and ``searching(task, n)``, whether such a slot would run the
    expensive search (``None``: never)."""

    seconds_left: Callable[[Snapshot], float] | None = None
    pace: SlotPace | None = None
    searching: Callable[[int, int], bool] | None = None


@dataclass
class _Progress:
    best_history: list[float] = field(default_factory=list)
    trials_history: list[int] = field(default_factory=list)
    slot_numbers: list[int] = field(default_factory=list)
    trial_bests: list[float] = field(default_factory=list)
    trials: int = 0
    failures: int = 0
    since_improvement: int = 0
    finished: bool = False

    @property
    def best(self) -> float:
        return self.best_history[-1] if self.best_history else math.inf


class Ledger:
    """The state and rules of one run (see the module docstring).

    ``tasks`` are the model's tasks (anything with ``name``, ``weight``, ``flops`` and ``default_latency``:
    :class:`tunewise.lowering.tasks.Task`, :class:`tunewise.lab.replay.TraceTask`); ``clock()`` gives the run's
    tuning time so far in seconds (earlier sessions of the run included); ``pacing`` (:class:`Pacing`) is the
    driver's further time limit and slot pacing. Tasks in ``exhausted`` are finished from the start.
    ``stoppers`` are stop rules (instances or names, see :func:`tunewise.stoppers.create`); ``joules()``, when
    given, is the energy the run has used so far (:meth:`tunewise.energy.EnergyMeter.read`), which they see in
    the run's :meth:`cost`. The members of selective tuning's groups are set with :meth:`set_members`.
    ``forecaster`` (:class:`~tunewise.forecast.Forecaster`), when given, forecasts the model latency after
    every slot (:attr:`forecast`).
    """

    def __init__(self, tasks: Sequence, scheduler, budget: Budget, *, trials_per_slot: int = 16,
                 clock: Callable[[], float], pacing: Pacing = Pacing(), exhausted: Iterable[int] = (),
                 stoppers: Iterable = (), joules: Callable[[], float] | None = None, forecaster=None):
        if trials_per_slot <= 0:
            raise InputError(f"trials per slot must be positive, got {trials_per_slot}")
        self.tasks = tuple(tasks)
        self.scheduler = scheduler
        self.budget = budget
        self.trials_per_slot = trials_per_slot
        self.clock = clock
        self.pace = pacing.pace
        self._seconds_left = pacing.seconds_left
        self._searching = pacing.searching or (lambda task, n: False)
        self.stoppers = tuple(stop_rules.create(rule) for rule in stoppers)
        self._joules = joules
        self.members: Members | None = None
        self.forecaster = forecaster
        self.forecast = None  # the latest forecast (tunewise.forecast.Forecast)
        self._forecasting = forecaster is not None  # off while a stored run is told
        self._retired = getattr(scheduler, "retired", None)
        self.stopped_by: str | None = None  # the reason of the stop rule that ended the run
        self.measured: list[tuple[float, float]] = []  # (elapsed, model latency) the driver measured
        self._progress = [_Progress() for _ in self.tasks]
        for k in exhausted:
            self._progress[k].finished = True
        self.trials = 0
        self.slots = 0  # the number the next slot gets
        self.decision_seconds = 0.0  # of the slots asked for (recorded ones not included)
        self.last_decision = 0.0
        self.decisions = 0  # times the scheduler was asked, recorded slots included
        self.history: list[tuple[float, float]] = []
        self.history.append((0.0, self.snapshot().estimated_latency()))

    def snapshot(self) -> Snapshot:
        """The run now, frozen."""
        views = tuple(self._view(i) for i in range(len(self.tasks)))
        return Snapshot(tasks=views, elapsed=self.clock(), trials=self.trials, slot=self.slots,
                        trials_per_slot=self.trials_per_slot, max_trials=self._max_trials(),
                        per_task_trials=self.budget.per_task_trials, history=tuple(self.history),
                        measured=tuple(self.measured), forecast=self.forecast)

    def _max_trials(self) -> int | None:
        """The run's trial budget, raised by the failed trials when they do not count against it."""
        b = self.budget
        if b.max_trials is None or b.count_failures:
            return b.max_trials
        return b.max_trials + sum(p.failures for p in self._progress)

    def cost(self) -> Cost:
        """What the run has spent so far: tuning seconds, trials, and joules when ``joules`` was given."""
        return Cost(self.clock(), self.trials, None if self._joules is None else self._joules())

    def best(self, task: int) -> float:
        """Task ``task``'s best latency so far (``inf`` while none is valid)."""
        return self._progress[task].best

    def seconds_left(self) -> float:
        """Tuning time left under the time budget and the driver's limit (``inf`` when neither is set)."""
        left = self._budget_seconds_left()
        if self._seconds_left is not None:
            left = min(left, self._seconds_left(self.snapshot()))
        return left

    def _budget_seconds_left(self) -> float:
        return math.inf if self.budget.time_budget is None else self.budget.time_budget - self.clock()

    def _trials_spent(self) -> bool:
        limit = self._max_trials()
        return limit is not None and self.trials >= limit

    def _due(self, snapshot: Snapshot) -> int | None:
        """The held member due a transfer slot, if any (selective tuning)."""
        return None if self.members is None else self.members.due(snapshot.tasks)

    def spent(self) -> bool:
        """Whether the run's own limits end it: its trial budget (as :class:`~tunewise.budget.Budget` counts
        failures) or its tuning time is spent, no task is live or due a transfer, or a stop rule ended it. A
        driver's own time limit is not one of them: a driver that ran out of its time (a round of a cluster)
        leaves a run that is not spent."""
        if self.stopped_by is not None or self._trials_spent() or self._budget_seconds_left() <= 0:
            return True
        snapshot = self.snapshot()
        return not snapshot.live and self._due(snapshot) is None

    def ask(self) -> Slot | None:
        """The next slot, or ``None`` when the run is over.

        The run is over, checked in this order, when the budget's trials are used, its tuning time or the
        driver's limit (:attr:`Pacing.seconds_left`) is spent, no task is live, a stop rule
        (:mod:`tunewise.stoppers`) says so (its reason kept in :attr:`stopped_by`), or the scheduler returns
        ``None``. A slot gets ``trials_per_slot`` trials, fewer when the run's or the task's trial budget has
        fewer left, and under a time limit only those the :class:`~tunewise.tuning.timebudget.SlotPace` says
        finish in time. Under selective tuning (:class:`~tunewise.sharing.Members`) a held member due a transfer
        gets a transfer slot first (:attr:`Slot.source` set, ``top`` trials at most, no scheduler decision)."""
        if self._trials_spent() or self.seconds_left() <= 0:
            return None
        snapshot = self.snapshot()
        due = self._due(snapshot)
        if (not snapshot.live and due is None) or self._stopped(snapshot):
            return None
        if due is not None:
            return self._transfer_slot(snapshot, due)
        task = self._decide(snapshot)
        self.decision_seconds += self.last_decision
        if task is None:
            return None
        n = self.trials_that_fit(task, slot_size(snapshot, snapshot.tasks[task]))
        if n == 0:
            return None  # not one more trial has time to finish
        return self._open(task, n)

    def trials_that_fit(self, task: int, n: int) -> int:
        """How many of ``n`` trials a slot of ``task`` can take and still end in the time left, as its
        :class:`~tunewise.tuning.timebudget.SlotPace` predicts (0 when not one can); ``n`` without a pace (the time
        limits are then checked between slots)."""
        if self.pace is None:
            return n
        return self.pace.trials_that_fit(self.seconds_left(), n, searching=self._searching(task, n))

    def _transfer_slot(self, snapshot: Snapshot, task: int) -> Slot | None:
        n = min(self.members.top, slot_size(snapshot, snapshot.tasks[task]))
        self.last_decision = 0.0
        if self.pace is not None:
            n = self.pace.trials_that_fit(self.seconds_left(), n, searching=False)
            if n == 0:
                return None
        slot = Slot(self.slots, task, n, 0.0, self.members.source(task))
        self.slots += 1
        return slot

    def set_members(self, members: Members) -> None:
        """Hold the members of selective tuning's groups (:class:`~tunewise.sharing.Members`): only before any
        slot is told."""
        if len(self.history) > 1 or any(p.best_history for p in self._progress):
            raise RuntimeError("members are set before any slot is told")
        self.members = members

    def recorded(self, index: int, task: int, trials: int) -> Slot:
        """Slot number ``index``, which the run already measured (``trials`` trials of ``task``, as the store
        holds it): the scheduler is shown the run as it was, and the choice the run made is taken; a slot of a
        held member is its transfer slot, which the scheduler did not choose. Slots handed out later are
        numbered after every recorded one."""
        self.slots = max(self.slots, index + 1)
        source = None if self.members is None else self.members.source(task)
        if source is not None:
            return Slot(index, task, trials, 0.0, source)
        self._decide(self.snapshot(), check=False)
        return Slot(index, task, trials, self.last_decision)

    def tell(self, slot: Slot, latencies: Sequence[float], *, exhausted: bool = False) -> None:
        """What ``slot`` measured: one latency in seconds per trial (``inf`` for a failure). No latencies, or
        ``exhausted``, finish the task: its search space has nothing more to propose; no latencies for a transfer
        slot (:attr:`Slot.source`) make the member fall back to being searched instead. A task is also finished
        after the slot that spends its ``per_task_trials``, that ends ``patience`` trials without improvement (a
        slot whose best beats the task's best before it), or after which the scheduler says it is retired
        (:meth:`~tunewise.schedulers.TaskScheduler.retired`). With a forecaster the ledger forecasts the model
        latency after the slot."""
        progress = self._progress[slot.task]
        if not latencies:
            if slot.source is not None:
                self.members.transfer_measured(self._view(slot.task), self._view(slot.source), [])
            else:
                progress.finished = True
                self._searched(slot.task)
            return
        before = progress.best
        best = min([before, *latencies])
        progress.trials += len(latencies)
        progress.failures += sum(x == math.inf for x in latencies)
        progress.since_improvement = 0 if best < before else progress.since_improvement + len(latencies)
        progress.best_history.append(best)
        progress.trials_history.append(progress.trials)
        progress.slot_numbers.append(slot.index)
        progress.trial_bests += list(itertools.accumulate(latencies, min, initial=before))[1:]
        self.trials += len(latencies)
        b = self.budget
        if (exhausted or (b.per_task_trials is not None and progress.trials >= b.per_task_trials)
                or (b.patience is not None and progress.since_improvement >= b.patience)
                or (self._retired is not None and self._retired(self._view(slot.task)))):
            progress.finished = True
        if slot.source is not None:
            self.members.transfer_measured(self._view(slot.task), self._view(slot.source), latencies)
        else:
            self._searched(slot.task)
        self.history.append((self.clock(), self.snapshot().estimated_latency()))
        if self._forecasting:
            self.update_forecast()

    def update_forecast(self) -> None:
        """Forecast the run as it stands now (:attr:`forecast`), with the tuning time the budgets leave."""
        self.forecast = self.forecaster(self.snapshot(), seconds_left=self.seconds_left())

    def set_default_latencies(self, latencies: Sequence[float]) -> None:
        """The tasks' default latencies (seconds each, ``inf`` where the default schedule failed), measured after
        the run started: only before any slot is told (a new run measures them after its first slot's
        candidates and then tells that slot). The run's starting point in :attr:`history` becomes the
        untuned estimate."""
        if len(self.history) > 1:
            raise RuntimeError("default latencies are set before any slot is told")
        self.tasks = tuple(replace(t, default_latency=latency)
                           for t, latency in zip(self.tasks, latencies, strict=True))
        self.history[0] = (0.0, self.snapshot().estimated_latency())

    def restore(self, store, run: int) -> Restored:
        """Tell this ledger what run ``run`` of ``store`` (a :class:`~tunewise.stores.Store`) holds: its
        whole-model latencies, then its slots in order, each at the tuning time it was stored at (a slot whose
        task's space was exhausted finishes the task; a slot stored twice, by two processes that tuned the run
        at once, is told once, with every trial stored under it). The default latencies (and members) are set
        first, as the run stored them. Returns what the driver needs to go on from there."""
        from collections import defaultdict

        clock, elapsed, joules, restored = self.clock, 0.0, 0.0, []
        self.clock = lambda: elapsed
        forecasting, self._forecasting = self._forecasting, False
        try:
            by_slot = defaultdict(list)
            for trial in store.get_trials(run):
                by_slot[trial.slot].append(trial)
            checks = tuple(store.get_model_latencies(run))
            for point in checks:
                self.tell_model_latency(point.latency, at=point.elapsed)
                joules += point.joules or 0.0
            for checkpoint in store.get_checkpoints(run):
                elapsed = max(elapsed, checkpoint.elapsed)
                joules += checkpoint.joules or 0.0
                if checkpoint.trials == 0:  # the task's space was exhausted
                    self.tell(self.recorded(checkpoint.slot, checkpoint.task, 0), [])
                    continue
                if checkpoint.slot not in by_slot:  # a slot stored twice: its trials are all told once
                    continue
                trials = by_slot.pop(checkpoint.slot)
                slot = self.recorded(checkpoint.slot, checkpoint.task, len(trials))
                for k in sorted({t.task for t in trials}):
                    self.tell(replace(slot, task=k), [t.latency for t in trials if t.task == k])
                restored += trials
            if forecasting and restored:
                self.update_forecast()
        finally:
            self.clock = clock
            self._forecasting = forecasting
        return Restored(trials=tuple(restored), elapsed=elapsed, joules=joules, checks=checks)

    def tell_model_latency(self, latency: float, *, at: float | None = None) -> None:
        """The whole model, built with the best schedules so far, ran in ``latency`` seconds (``inf``: it
        failed) at tuning time ``at`` (default: now): kept in the snapshot's ``measured`` for the stop rules,
        which prefer it to the estimate; the forecast is made again, now of the compiled model."""
        if not latency > 0:
            raise ValueError(f"a model latency must be > 0 seconds (inf for a failure), got {latency!r}")
        self.measured.append((self.clock() if at is None else at, latency))
        if self._forecasting and self.forecast is not None:
            self.update_forecast()

    def _searched(self, task: int) -> None:
        """Tell the members that a search slot of ``task`` was told (a representative may have settled)."""
        if self.members is not None:
            self.members.searched(tuple(self._view(i) for i in range(len(self.tasks))), task)

    def _view(self, i: int) -> TaskView:
        t, p = self.tasks[i], self._progress[i]
        return TaskView(index=i, name=t.name, weight=t.weight, flops=t.flops, default_latency=t.default_latency,
                        best_history=tuple(p.best_history), trials_history=tuple(p.trials_history), trials=p.trials,
                        failures=p.failures, finished=p.finished,
                        source=None if self.members is None else self.members.source(i),
                        slot_numbers=tuple(p.slot_numbers), trial_bests=tuple(p.trial_bests))

    def _stopped(self, snapshot: Snapshot) -> bool:
        if not self.stoppers:
            return False
        cost = self.cost()
        for rule in self.stoppers:
            reason = rule.check(snapshot, cost)
            if reason is not None:
                self.stopped_by = reason
                return True
        return False

    def _decide(self, snapshot: Snapshot, *, check: bool = True) -> int | None:
        tick = time.perf_counter()
        task = self.scheduler.next(snapshot)
        self.last_decision = time.perf_counter() - tick
        self.decisions += 1
        if check and task is not None and snapshot.tasks[task].finished:
            raise RuntimeError(f"scheduler {self.scheduler!r} chose finished task {task}")
        return task

    def _open(self, task: int, n: int) -> Slot:
        slot = Slot(self.slots, task, n, self.last_decision)
        self.slots += 1
        return slot
