"""The tuning loop: the only place that proposes, measures and records.

Each *slot*: the run's :class:`~tunewise.tuning.ledger.Ledger` (the rules: budgets, slot sizes, when a task or
the run is finished) hands out a task and its trials; the sharing planner (:class:`tunewise.sharing.Planner`)
gives schedules made elsewhere, else the task's search (:class:`tunewise.tuning.search.TaskSearch`) proposes;
the :class:`~tunewise.tuning.measure.Measurer` builds and measures them; the ledger is told their latencies;
the trials are committed to the store in one transaction with a checkpoint, so a killed process loses at most
the slot in flight. A new run without default latencies starts at once: its first slot goes to the heaviest
task by FLOPs, then every task's default latency is measured in one batch. A run whose store holds trials is
resumed (the ledger told the stored slots, the cost model retrained, no candidate measured twice). A stop
request (:mod:`tunewise.job.interrupts`) ends the run between slots or drops the slot in flight; with an owner
(:mod:`tunewise.job.lease`) each slot is committed only while that owner holds the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
from tunewise.tuning.ledger import Ledger, Pacing, Slot, slot_size
from tunewise.tuning.model_checks import ModelCheck
from tunewise.tuning.search import TaskSearch, runner_result, trial_json
from tunewise.tuning.state import Snapshot


@dataclass(frozen=True, kw_only=True)
class SessionParts:
    """What a :class:`Session` is made of beside its model, scheduler, budget, measurer and run.

    How it searches: ``trials_per_slot``; ``search_batch``, the candidates of one call of a task's evolutionary
    search (``None``: ``trials_per_slot``); ``cost_model`` (a name or a MetaSchedule cost model; ``None``:
    ``"xgb"``); ``seed``; ``pretrained``, the ``"xgb"`` cost model started from the model shipped for the
    target's ISA class (:func:`tunewise.cost_models.pretrained_for`). How it shares: ``share`` (a
    :data:`tunewise.sharing.MODES` name, checked by :class:`~tunewise.settings.RunSettings`), ``warm_start`` and
    ``records_base`` (:func:`tunewise.sharing.open_base`; ``None``: none; its records are stored with
    :data:`~tunewise.stores.FROM_BASE` as their origin). What it is plugged into: ``callbacks``
    (:mod:`tunewise.callbacks`: instances or names), ``owner`` (:class:`tunewise.job.lease.Lease`'s),
    ``deadline`` (maps a snapshot to the ``time.perf_counter()`` instant tuning must end by), ``stoppers``
    (:mod:`tunewise.stoppers`), ``meter`` (:mod:`tunewise.energy`), ``checker``
    (:class:`~tunewise.tuning.model_checks.ModelCheck`), ``candidate_filter`` (:mod:`tunewise.filters`) and
    ``forecaster`` (:class:`~tunewise.forecast.Forecaster`).
    """

    trials_per_slot: int = 16
    search_batch: int | None = None
    cost_model: object = None
    seed: int = 0
    pretrained: bool = False
    share: str = "same-anchor"
    warm_start: bool = True
    records_base: sharing.BaseIndex | None = None
    callbacks: Sequence[Callback | str] = ()
    owner: str | None = None
    deadline: Callable[[Snapshot], float] | None = None
    stoppers: Sequence = ()
    meter: EnergyMeter | None = None
    checker: ModelCheck | None = None
    candidate_filter: CandidateFilter | None = None
    forecaster: object = None


class Session:
    """Tunes an :class:`~tunewise.lowering.tasks.ExtractedModel` under a budget with a task scheduler: the driver of a
    :class:`~tunewise.tuning.ledger.Ledger` that measures for real.

    Trials are recorded as run ``run`` of ``store`` (a :class:`~tunewise.stores.Store`), which must exist; the
    model's tasks are added to the run, or checked against those it has and the run resumed from what the store
    holds. ``model``'s default latencies, when unmeasured, are measured by the session (:attr:`model` has them
    after the first slot of :meth:`run`). ``parts`` (:class:`SessionParts`) says how it searches and shares and
    what it is plugged into: the callbacks are told every recorded slot and phase; each slot's joules and
    forecast are stored with its checkpoint; the checker's points are stored and told to the ledger; the
    candidate filter is told every measured trial and skips proposals (transferred schedules never), each
    slot's skipped count stored. :attr:`database` is the MetaSchedule view of the store the searches use;
    :attr:`pretrained_tasks` counts the tasks whose first slot the pretrained cost model ranked.
    """

    def __init__(self, model, scheduler, budget: Budget, measurer, store, run: int,
                 parts: SessionParts = SessionParts()):
        from tvm.s_tir import meta_schedule as ms

        if not budget.bounded:
            raise InputError("set a budget: trials, time or trials per task")
        self.model = model
        self.scheduler = scheduler
        self.budget = budget
        self.measurer = measurer
        self.store = store
        self.run_id = run
        self.owner = parts.owner
        self.database = stores.StoreDatabase(store, run=run, target=model.target)
        self.trials_per_slot = trials_per_slot = parts.trials_per_slot
        num_threads = targets.num_cores(model.target)
        cost_model = parts.cost_model
        named_xgb = cost_model is None or (isinstance(cost_model, str) and cost_model == "xgb")
        prior = cost_models.pretrained_for(model.target) if parts.pretrained and named_xgb else None
        self.prior = prior  # the pretrained model the cost model started from (None: none)
        self.cost_model = cost_models.create(cost_model or "xgb", **(
            {} if isinstance(cost_model, ms.CostModel) else
            {"seed": parts.seed, "num_tuning_cores": num_threads, **({} if prior is None else {"prior": prior})}))
        self.pretrained_tasks = 0  # tasks whose first slot the pretrained model ranked (in this process)
        self.callbacks = CallbackList(parts.callbacks)
        self.pace = timebudget.SlotPace()
        self.trials: list[StoredTrial] = []
        self._searches = [TaskSearch(m, t.name, model.target, parts.seed + i + 1, num_threads,
                                      parts.search_batch or trials_per_slot)
                          for i, (t, m) in enumerate(zip(model.tasks, model.task_mods, strict=True))]
        self._workloads = [self.database.workload_id(m, commit=True) for m in model.task_mods]
        self.share = parts.share
        self.planner = sharing.Planner(model, parts.share, parts.warm_start, store, self.database, self._workloads,
                                       parts.records_base)
        self.shared = 0  # trials that were schedules transferred from other tasks or runs (not from the base)
        self._offset = 0.0  # tuning time of earlier sessions of the run
        self._start = None
        self.meter, self.checker, self.filter = parts.meter, parts.checker, parts.candidate_filter
        self.skipped = 0  # proposals the filter skipped in this process
        self._joules_offset = 0.0  # energy of earlier sessions of the run
        self._in_flight: int | None = None  # the candidates of the slot in flight, until it is recorded
        self._meter_start = None if self.meter is None else self.meter.read().joules
        deadline = parts.deadline
        self.ledger = Ledger(
            model.tasks, scheduler, budget, trials_per_slot=trials_per_slot, clock=lambda: self.elapsed,
            pacing=Pacing(
                seconds_left=None if deadline is None else (lambda snapshot: deadline(snapshot) - time.perf_counter()),
                pace=self.pace, searching=lambda k, n: self._searches[k].searches(n, untrained=self._untrained)),
            stoppers=parts.stoppers, joules=None if self.meter is None else self.joules, forecaster=parts.forecaster)
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
        self.store.add_tasks(self.run_id, [StoredTask(index=i, name=t.name, workload=w, weight=t.weight, flops=t.flops,
                                                      default_latency=t.default_latency)
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
        :class:`~tunewise.tuning.model_checks.ModelCheck`, which the session must have; between slots, :meth:`run` does
        when
        the check is due); store the point and tell the ledger and the callbacks."""
        self.callbacks.phase("compiling and timing the model with the best records so far")
        start, joules = time.perf_counter(), self.joules()
        latency, message = self.checker.measure(self.model, self.database, trials=self.ledger.trials)
        checked = None if message else self.checker.latest
        point = stores.ModelLatency(elapsed=self.elapsed, trials=self.ledger.trials, latency=latency,
                                    seconds=time.perf_counter() - start,
                                    joules=None if self.meter is None else self.joules() - joules, message=message,
                                    timed=checked.timed if checked else None,
                                    to_previous=checked.to_previous if checked else None)
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
        trials = [StoredTrial(workload=self._workloads[k], record=trial_json(c, m, workload, self.model.target),
                              run_secs=m.run_secs, error=m.error, message=m.message, task=k, slot=slot.index,
                              target=target, candidate=key, build_seconds=m.build_seconds,
                              run_seconds=m.run_seconds, timestamp=now,
                              origin=stores.FROM_BASE if key in self.planner.from_base else None)
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
                slot=slot.index, task=k, trials=len(trials), elapsed=elapsed, seconds=time.perf_counter() - slot_start,
                latency=latency, joules=self._slot_joules(slot_joules), skipped=skipped, phase_joules=phase_joules,
                forecast=self.ledger.forecast if trials else None), owner=self.owner)
            self._in_flight = None
        if not trials:
            return
        reading = None if self.meter is None else self.meter.read()
        event = SlotEvent(slot=slot.index, task=k, trials=len(trials),
                          failures=sum(t.error is not None for t in trials), best_before=best_before,
                          best_after=self.ledger.best(k), seconds=time.perf_counter() - slot_start,
                          search_seconds=search_seconds, measure_seconds=measure_seconds,
                          decision_seconds=slot.decision_seconds, shared=len(shared),
                          joules=self._slot_joules(slot_joules), run_joules=None if reading is None else self.joules(),
                          joules_estimated=reading is not None and reading.estimated, skipped=skipped)
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
