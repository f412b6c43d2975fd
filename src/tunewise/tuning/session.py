"""The tuning loop: the only place that proposes, measures and records.

Each iteration is one *slot*: the run's :class:`~tunewise.tuning.ledger.Ledger` asks the scheduler for a task (and
decides how many trials it gets, and whether the run is over), the sharing planner
(:class:`tunewise.sharing.Planner`) gives schedules made elsewhere where there are any, else that task's search
(:class:`tunewise.tuning.search.TaskSearch`: MetaSchedule's evolutionary search guided by the shared cost model)
proposes a batch of candidates, the :class:`~tunewise.tuning.measure.Measurer` builds and measures them, the ledger is
told their latencies, and the slot's trials are committed to the store in one transaction with a checkpoint of
the run (so a process killed at any point loses at most the slot in flight). The searches read the store
through :class:`~tunewise.stores.StoreDatabase`, so they seed from every record of their workload, transferred
schedules included (they are real trials of the task).

The ledger holds the rules (:mod:`tunewise.tuning.ledger`): budgets (:class:`~tunewise.budget.Budget`), slot sizes,
when a task is finished, and which tasks selective sharing holds. Under a time limit (the budget's, or a
``deadline``) a slot is started only with the trials it has time for, as the durations of the slots before it
predict (:class:`tunewise.tuning.timebudget.SlotPace`). Failed candidates count against the budgets and are reported
separately.

A new run whose model comes without default latencies
(:attr:`~tunewise.lowering.tasks.ExtractedModel.defaults_measured`)
starts at once: its first slot goes to the heaviest task by FLOPs (:func:`tunewise.schedulers.heaviest_by_flops`),
then every task's default latency is measured in one batch, and that slot is recorded as the scheduler's first
choice. A kill before it is recorded leaves a run without tasks, which starts afresh when resumed.

A run whose store already holds trials is resumed: the ledger is told the slots the store holds (progress per
task, budgets spent, tuning time, the scheduler's decisions), its cost model is retrained on its records, and
candidates it already measured are never measured again. A slot stored twice (by two processes that tuned
the run at once, before runs had owners) is replayed once, with every trial stored under it.

A stop request (:mod:`tunewise.job.interrupts`) ends the run between slots, or drops the slot in flight (the
:class:`~tunewise.job.interrupts.Interrupted` raised says how many candidates it had); a slot some of whose
candidates failed while a stop was requested is dropped too (a signal to the process group may
have killed a worker). With ``owner`` (:mod:`tunewise.job.lease`), each slot is committed only while that owner
holds the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence

from tunewise import cost_models, schedulers, sharing, stores
from tunewise import target as targets
from tunewise.budget import Budget
from tunewise.callbacks import Callback, CallbackList, SlotEvent
from tunewise.energy import EnergyMeter
from tunewise.errors import InputError, RunBusyError, StoreError
from tunewise.filters import CandidateFilter, Measured
from tunewise.job import interrupts
from tunewise.lowering import tasks
from tunewise.stores import Checkpoint, StoredTask, StoredTrial
from tunewise.tuning import timebudget
from tunewise.tuning.checks import ModelCheck
from tunewise.tuning.ledger import Ledger, Slot, slot_size
from tunewise.tuning.search import TaskSearch, runner_result, trial_json
from tunewise.tuning.state import Snapshot


class Session:
    """Tunes an :class:`~tunewise.lowering.tasks.ExtractedModel` under a budget with a task scheduler: the driver of a
    :class:`~tunewise.tuning.ledger.Ledger` that measures for real.

    Trials are recorded as run ``run`` of ``store`` (a :class:`~tunewise.stores.Store`), which must exist;
    the model's tasks are added to the run, or, when the run has some, checked against them and the run is
    resumed from what the store holds (with the default latencies it stored). Each call of a task's evolutionary
    search returns ``search_batch`` candidates (default: ``trials_per_slot``). ``model``'s default latencies,
    when unmeasured, are measured by the session (:attr:`model` has them after the first slot of
    :meth:`run`). ``database`` is the MetaSchedule view of the store the searches use (for compiling with the
    results). ``callbacks`` (:mod:`tunewise.callbacks`: instances or names) are told
    every recorded slot and every phase of the slot in flight. ``owner`` names the process that owns the run
    (:class:`tunewise.job.lease.Lease`). ``deadline``, when given, maps a snapshot of the run to the
    ``time.perf_counter()`` instant by which tuning must end (a whole command's budget, less what is left to
    do after tuning). ``stoppers`` are the ledger's stop rules (:mod:`tunewise.stoppers`). ``meter``
    (:mod:`tunewise.energy`) meters the run: each slot's joules are stored with its checkpoint, and the stop
    rules see the run's energy. ``checker`` (:class:`~tunewise.tuning.checks.ModelCheck`) measures the whole model
    between slots when it is due; each point is stored (:meth:`~tunewise.stores.Store.add_model_latency`)
    and told to the ledger. ``candidate_filter`` (:mod:`tunewise.filters`) is told every measured trial and
    skips proposals before they are measured; the search proposes others in their place (transferred
    schedules are never skipped), and each slot's skipped count is stored with it. ``share`` is a
    :data:`tunewise.sharing.MODES` name and ``warm_start`` lets new tasks start from other runs' records (see
    the module docstring); ``records_base`` (:func:`tunewise.sharing.open_base`; ``None``: none) gives a new
    task the record base's records where the store has none of its workload, each measured here as a trial
    of the run, stored with :data:`~tunewise.stores.FROM_BASE` as its origin. ``pretrained`` starts the
    ``"xgb"`` cost model (``cost_model`` ``None`` or ``"xgb"``) from the pretrained model shipped for the
    target's ISA class, where there is one (:func:`tunewise.cost_models.pretrained_for`): each task's first
    slot is then searched and ranked by it rather than sampled at random, and :attr:`pretrained_tasks` counts
    the tasks it ranked so. ``forecaster`` (:class:`~tunewise.forecast.Forecaster`) forecasts the model latency
    after every slot: the ledger's snapshots carry it, and each slot's forecast is stored with its checkpoint.
    """

    def __init__(self, model, scheduler, budget: Budget, measurer, store, run: int, *, trials_per_slot: int = 16,
                 search_batch: int | None = None, cost_model=None, seed: int = 0, share: str = "same-anchor",
                 warm_start: bool = True, records_base: sharing.BaseIndex | None = None, pretrained: bool = False,
                 callbacks: Sequence[Callback | str] = (), owner: str | None = None,
                 deadline: Callable[[Snapshot], float] | None = None, stoppers: Sequence = (),
                 meter: EnergyMeter | None = None, checker: ModelCheck | None = None,
                 candidate_filter: CandidateFilter | None = None, forecaster=None):
        from tvm.s_tir import meta_schedule as ms

        if not budget.bounded:
            raise InputError("set a budget: trials, time or trials per task")
        if share not in sharing.MODES:
            raise InputError(f"unknown sharing mode {share!r}; choose one of: {', '.join(sharing.MODES)}")
        self.model = model
        self.scheduler = scheduler
        self.budget = budget
        self.measurer = measurer
        self.store = store
        self.run_id = run
        self.owner = owner
        self.database = stores.StoreDatabase(store, run=run, target=model.target)
        self.trials_per_slot = trials_per_slot
        num_threads = targets.num_cores(model.target)
        named_xgb = cost_model is None or (isinstance(cost_model, str) and cost_model == "xgb")
        prior = cost_models.pretrained_for(model.target) if pretrained and named_xgb else None
        self.prior = prior  # the pretrained model the cost model started from (None: none)
        self.cost_model = cost_models.create(cost_model or "xgb", **(
            {} if isinstance(cost_model, ms.CostModel) else
            {"seed": seed, "num_tuning_cores": num_threads, **({} if prior is None else {"prior": prior})}))
        self.pretrained_tasks = 0  # tasks whose first slot the pretrained model ranked (in this process)
        self.callbacks = CallbackList(callbacks)
        self.pace = timebudget.SlotPace()
        self.trials: list[StoredTrial] = []
        self._searches = [TaskSearch(m, t.name, model.target, seed + i + 1, num_threads,
                                      search_batch or trials_per_slot)
                          for i, (t, m) in enumerate(zip(model.tasks, model.task_mods, strict=True))]
        self._workloads = [self.database.workload_id(m, commit=True) for m in model.task_mods]
        self.share = share
        self.planner = sharing.Planner(model, share, warm_start, store, self.database, self._workloads,
                                       records_base)
        self.shared = 0  # trials that were schedules transferred from other tasks or runs (not from the base)
        self._offset = 0.0  # tuning time of earlier sessions of the run
        self._start = None
        self.meter, self.checker, self.filter = meter, checker, candidate_filter
        self.skipped = 0  # proposals the filter skipped in this process
        self._joules_offset = 0.0  # energy of earlier sessions of the run
        self._in_flight: int | None = None  # the candidates of the slot in flight, until it is recorded
        self._meter_start = None if meter is None else meter.read().joules
        self.ledger = Ledger(
            model.tasks, scheduler, budget, trials_per_slot=trials_per_slot, clock=lambda: self.elapsed,
            seconds_left=None if deadline is None else (lambda snapshot: deadline(snapshot) - time.perf_counter()),
            pace=self.pace, searching=lambda k, n: self._searches[k].searches(n, untrained=self._untrained),
            stoppers=stoppers, joules=None if meter is None else self.joules, forecaster=forecaster)
        self._attach()

    # -- state -------------------------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        """Tuning time of the run so far, earlier sessions included."""
        return self._offset + (0.0 if self._start is None else time.perf_counter() - self._start)

    def joules(self) -> float:
        """Energy the run has used so far, earlier sessions included (0 without a meter)."""
        if self.meter is None:
            return 0.0
        return self._joules_offset + self.meter.read().joules - self._meter_start

    @property
    def history(self) -> list[tuple[float, float]]:
        """``(tuning seconds, estimated model latency)`` at the start and after every slot that measured."""
        return self.ledger.history

    @property
    def decision_seconds(self) -> float:
        """Seconds the scheduler's decisions took in this process."""
        return self.ledger.decision_seconds

    def snapshot(self) -> Snapshot:
        return self.ledger.snapshot()

    @property
    def _untrained(self) -> bool:
        """Whether the cost model knows nothing yet: no trial measured, and no pretrained model."""
        return not self.trials and self.prior is None

    # -- resuming ----------------------------------------------------------------------------------------
    def _attach(self) -> None:
        """Add the tasks to a new run (once their default latencies are measured), or tell the ledger the
        slots of a run the store already holds."""
        stored = self.store.get_tasks(self.run_id)
        if not stored:
            if self.model.defaults_measured:
                self._add_tasks()
                self._select()
            return
        if [t.workload for t in stored] != self._workloads:
            raise InputError(f"run {self.run_id} tuned other tasks than {self.model.name} has now "
                             "(different model, graph level or target); start a new run")
        self.model = self.model.with_default_latencies(t.default_latency for t in stored)
        self.ledger.set_default_latencies([t.default_latency for t in self.model.tasks])
        self._select()
        restored = self.ledger.restore(self.store, self.run_id)
        self._offset, self._joules_offset = restored.elapsed, restored.joules
        if self.checker is not None:
            for point in restored.checks:
                self.checker.checked(point.elapsed, point.seconds)
        for trial in restored.trials:
            self._searches[trial.task].seen.add(trial.candidate)
            self._searches[trial.task].earlier.append(trial)
        self.trials += restored.trials
        if self.filter is not None:
            self.filter.tell([Measured(t.workload, t.record, t.latency) for t in self.trials if t.record])

    def _add_tasks(self) -> None:
        self.store.add_tasks(self.run_id, [StoredTask(i, t.name, w, t.weight, t.flops, t.default_latency)
                                           for i, (t, w) in enumerate(zip(self.model.tasks, self._workloads,
                                                                          strict=True))])

    def _measure_defaults(self) -> None:
        """Measure every task's default latency (one batch), tell the ledger and add the tasks to the run."""
        self.model = tasks.measure_defaults(self.model, self.measurer)
        self.ledger.set_default_latencies([t.default_latency for t in self.model.tasks])
        self._add_tasks()
        self._select()

    def _select(self) -> None:
        """Under selective sharing, group the tasks (their default latencies known) and hold the members."""
        members = self.planner.select(self.model.tasks)
        if members is not None:
            self.ledger.set_members(members)

    @property
    def selection(self) -> sharing.Selection | None:
        """The groups of selective tuning, once chosen (``None`` in the other modes)."""
        return self.planner.selection

    # -- acting ------------------------------------------------------------------------------------------
    def run(self) -> Snapshot:
        """Tune until the ledger says the run is over.

        The run's status is ``running`` meanwhile, then ``tuned``; ``interrupted`` or ``failed`` when an
        exception (Ctrl-C included) ends it, unless the run was taken over by another owner or the store can
        no longer be written.
        """
        self.store.set_status(self.run_id, stores.RUNNING)
        self._start = time.perf_counter()
        try:
            if not self.model.defaults_measured:
                if self.share == "selective":  # the groups' representatives are chosen by latency
                    self._measure_defaults()
                else:
                    self._open()
            while True:
                interrupts.raise_if_stopped()
                slot = self.ledger.ask()
                if slot is None:
                    break
                self._run_slot(slot)
                if self.checker is not None and self.checker.due(self.snapshot(), self.ledger.seconds_left()):
                    self.check_model()
        except RunBusyError:
            raise
        except BaseException as err:
            with contextlib.suppress(Exception):  # a store that cannot record it: ``err`` says why
                self.store.set_status(self.run_id, stores.INTERRUPTED if isinstance(err, KeyboardInterrupt)
                                      else stores.FAILED)
            if self._in_flight is not None and isinstance(err, KeyboardInterrupt):
                stop = err if isinstance(err, interrupts.Interrupted) else interrupts.Interrupted()
                raise stop.dropping(self._in_flight) from None
            if self._in_flight is not None and isinstance(err, StoreError):
                raise StoreError(f"{err}; the slot in flight, {self._in_flight} candidates, was dropped") from None
            raise
        self.store.set_status(self.run_id, stores.TUNED)
        return self.snapshot()

    def check_model(self) -> None:
        """Measure the whole model with the best records so far, now (the session's
        :class:`~tunewise.tuning.checks.ModelCheck`, which the session must have; between slots, :meth:`run` does when
        the check is due); store the point and tell the ledger and the callbacks."""
        self.callbacks.phase("compiling and timing the model with the best records so far")
        start, joules = time.perf_counter(), self.joules()
        latency, message = self.checker.measure(self.model, self.database, trials=self.ledger.trials)
        checked = None if message else self.checker.latest
        point = stores.ModelLatency(self.elapsed, self.ledger.trials, latency, time.perf_counter() - start,
                                    None if self.meter is None else self.joules() - joules, message,
                                    checked.timed if checked else None, checked.to_previous if checked else None)
        self.store.add_model_latency(self.run_id, point)
        self.ledger.tell_model_latency(latency, at=point.elapsed)
        self.checker.checked(point.elapsed, point.seconds)
        self.callbacks.model_measured(point, self.snapshot())

    def _open(self) -> None:
        """Slot 0 of a new run, to the heaviest task by FLOPs, with the default latencies measured after its
        candidates (:meth:`_run_slot`); only the default latencies when the time left has no room for a slot."""
        snapshot = self.snapshot()
        first = schedulers.heaviest_by_flops(snapshot.tasks)
        n = self.ledger.trials_that_fit(first.index, slot_size(snapshot, first))
        if n == 0:
            self._measure_defaults()
            return
        self._run_slot(Slot(0, first.index, n), opening=True)

    def _run_slot(self, slot: Slot, *, opening: bool = False) -> None:
        """Propose, measure and record ``slot``. An ``opening`` slot (the ledger did not hand it out) is followed
        by the default latencies, and then recorded as the run's choice (:meth:`Ledger.recorded`)."""
        k, n, search = slot.task, slot.n, self._searches[slot.task]
        searching = slot.source is None and search.searches(n, untrained=self._untrained)
        before = dataclasses.replace(self.snapshot(), slot=slot.index)  # the run as the slot in flight found it

        readings = {}  # the run's joules as each phase of the slot began

        def on_phase(phase: str) -> None:
            readings[phase] = self.joules()
            self.callbacks.slot_phase(before, k, phase)

        on_phase("search")
        slot_start, slot_joules = time.perf_counter(), readings["search"]
        self._in_flight = n
        proposed, shared, skipped = self._propose(slot)
        self._in_flight = len(proposed)
        search_seconds = time.perf_counter() - slot_start
        best_before = self.ledger.best(k)
        candidates = [c for c, _ in proposed]
        measure_start = time.perf_counter()
        measurements = self.measurer.measure([(c.sch.mod, c.args_info) for c in candidates], reference=best_before,
                                             on_phase=on_phase) if proposed else []
        measure_seconds = time.perf_counter() - measure_start
        phase_joules = (None if self.meter is None or "measure" not in readings else
                        (readings["build"] - readings["search"], readings["measure"] - readings["build"],
                         self.joules() - readings["measure"]))
        if any(m.error for m in measurements):
            interrupts.raise_if_stopped()
        if opening:
            on_phase("default latencies")
            defaults_start = time.perf_counter()
            self._measure_defaults()  # a stop asked for meanwhile comes after the slot is recorded
            slot = self.ledger.recorded(slot.index, k, len(proposed))
            slot_start += time.perf_counter() - defaults_start  # they are not the slot's
        now, target, workload = time.time(), str(self.model.target), self.database.workload(self._workloads[k])
        trials = [StoredTrial(self._workloads[k], trial_json(c, m, workload, self.model.target), m.run_secs,
                              m.error, m.message, k, slot.index, target, key, m.build_seconds, m.run_seconds, now,
                              stores.FROM_BASE if key in self.planner.from_base else None)
                  for (c, key), m in zip(proposed, measurements, strict=True)]
        # no trials: the space is exhausted (or the per-task budget has no room); a held member falls back
        self.ledger.tell(slot, [t.latency for t in trials])
        self.trials += trials
        self.shared += sum(key not in self.planner.from_base for _, key in shared)
        self.skipped += skipped
        elapsed, latency = self.history[-1] if trials else (self.elapsed, self.snapshot().estimated_latency())
        try:  # what the slot taught the search and the filter is the slot's work, in its time and energy
            if trials:
                search.notify(candidates, [runner_result(t) for t in trials], self.cost_model)
                if self.filter is not None:
                    self.filter.tell([Measured(t.workload, t.record, t.latency) for t in trials])
        finally:  # the trials are stored whatever that learning raised
            self.store.add_trials(self.run_id, trials, Checkpoint(
                slot.index, k, len(trials), elapsed, time.perf_counter() - slot_start, latency,
                self._slot_joules(slot_joules), skipped, phase_joules, self.ledger.forecast if trials else None),
                owner=self.owner)
            self._in_flight = None
        if not trials:
            return
        reading = None if self.meter is None else self.meter.read()
        event = SlotEvent(slot.index, k, len(trials), sum(t.error is not None for t in trials), best_before,
                          self.ledger.best(k), time.perf_counter() - slot_start, search_seconds, measure_seconds,
                          slot.decision_seconds, len(shared), self._slot_joules(slot_joules),
                          None if reading is None else self.joules(), reading is not None and reading.estimated,
                          skipped)
        self.pace.record(searching=searching, trials=len(trials), measure_seconds=measure_seconds,
                         fixed=slot.decision_seconds + event.seconds - measure_seconds)
        self.callbacks.slot_recorded(event, self.snapshot())

    def _propose(self, slot: Slot) -> tuple[list, list, int]:
        """``(proposed, shared, skipped)`` for ``slot``: the ``(candidate, hash)`` pairs it measures, those of them
        that are schedules made elsewhere (:class:`~tunewise.sharing.Planner`; a slot given any measures only
        those), and how many proposals the candidate filter skipped."""
        k, n, search = slot.task, slot.n, self._searches[slot.task]
        max_trials = self.budget.per_task_trials or self.budget.max_trials or 1_000_000
        if slot.source is not None:  # a held member's transfer slot: its representative's records, or nothing
            given = self.planner.member_transfers(k, slot.source, n, search.seen)
        else:
            fresh = not (self.ledger.snapshot().tasks[k].trials or search.seen)
            given = self.planner.transfers(k, n, self.ledger.best(k)) or (self.planner.warm(k, n) if fresh else [])
        shared = search.adopt(given, self.database, self.cost_model, max_trials)
        if shared or slot.source is not None:
            return shared, shared, 0
        if self.prior is not None and not (self.ledger.snapshot().tasks[k].trials or search.seen):
            self.pretrained_tasks += 1
        if self.filter is None:
            return search.propose(n, self.database, self.cost_model, max_trials, untrained=self._untrained), [], 0
        workload = self.database.workload(self._workloads[k])
        proposed, skipped = search.propose_unskipped(n, self.database, self.cost_model, max_trials, self.filter,
                                                     self._workloads[k], workload, untrained=self._untrained)
        return proposed, [], skipped

    def _slot_joules(self, at_start: float) -> float | None:
        return None if self.meter is None else self.joules() - at_start
