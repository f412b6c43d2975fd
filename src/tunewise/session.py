"""The tuning loop: the only place that proposes, measures and records.

Each iteration is one *slot*: the run's :class:`~tunewise.ledger.Ledger` asks the scheduler for a task (and
decides how many trials it gets, and whether the run is over), that task's MetaSchedule search (evolutionary
search guided by the shared cost model) proposes a batch of candidates, the
:class:`~tunewise.measure.Measurer` builds and measures them, the ledger is told their latencies, and the
slot's trials are committed to the store in one transaction with a checkpoint of the run (so a process
killed at any point loses at most the slot in flight). The searches read the store through
:class:`~tunewise.stores.StoreDatabase`, so they seed from every record of their workload.

The ledger holds the rules (:mod:`tunewise.ledger`): budgets (:class:`~tunewise.ledger.Budget`: total trials,
tuning time, trials per task, per-task patience), slot sizes, and when a task is finished. Under a time limit
(the budget's, or a ``deadline``) a slot is started only with the trials it has time for, as the durations of
the slots before it predict (:class:`tunewise.timebudget.SlotPace`). Failed candidates count against the
budgets and are reported separately.

Tasks share schedules as the ``share`` mode says (:mod:`tunewise.sharing`). Under ``"same-anchor"``, tasks
that share their main computation (the same convolution with different fused epilogues) help each other:
before a task's slot is searched, the best records of its group-mates that beat its own best are transferred
to it, and such a slot measures only those. Under ``"selective"``, the default latencies are measured first,
the tasks are grouped by the similarity of their design spaces (:func:`tunewise.sharing.select_tasks`) and
the ledger holds every group member that is not its representative (:class:`tunewise.sharing.Members`): a
member's slots are transfer slots, which measure its representative's best records fitted to its shape
(:func:`tunewise.sharing.transfer_across`), until it falls back to a search of its own. With ``warm_start``,
a task's first slot measures the best records of the most similar workloads that other runs stored
(:func:`tunewise.sharing.warm_sources`) when there are any. Transferred schedules are real trials of the task,
and its search then seeds from them.

A new run whose model comes without default latencies (:attr:`~tunewise.tasks.ExtractedModel.defaults_measured`)
starts at once: its first slot goes to the heaviest task by FLOPs (:func:`tunewise.schedulers.heaviest_by_flops`),
then every task's default latency is measured in one batch, and that slot is recorded as the scheduler's first
choice. A kill before it is recorded leaves a run without tasks, which starts afresh when resumed.

A run whose store already holds trials is resumed: the ledger is told the slots the store holds (progress per
task, budgets spent, tuning time, the scheduler's decisions), its cost model is retrained on its records, and
candidates it already measured are never measured again. A slot stored twice (by two processes that tuned
the run at once, before runs had owners) is replayed once, with every trial stored under it.

A stop request (:mod:`tunewise.interrupts`) ends the run between slots, or drops the slot in flight; a slot
some of whose candidates failed while a stop was requested is dropped too (a signal to the process group may
have killed a worker). With ``owner`` (:mod:`tunewise.lease`), each slot is committed only while that owner
holds the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tunewise import cost_models, interrupts, schedulers, sharing, spaces, stores, tasks, timebudget
from tunewise import target as targets
from tunewise.callbacks import Callback, CallbackList
from tunewise.checks import ModelCheck
from tunewise.energy import EnergyMeter
from tunewise.errors import InputError, RunBusyError
from tunewise.filters import CandidateFilter, Measured
from tunewise.ledger import Budget, Ledger, Slot, slot_size
from tunewise.state import Snapshot
from tunewise.stores import Checkpoint, StoredTask, StoredTrial


@dataclass(frozen=True)
class SlotEvent:
    """What one slot did, sent to the callbacks after it is recorded."""

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
    shared: int = 0  # trials that were schedules transferred from other tasks or runs (:mod:`tunewise.sharing`)
    joules: float | None = None  # energy the slot used (None: not metered)
    run_joules: float | None = None  # energy the run has used so far, this slot included
    joules_estimated: bool = False  # the meter estimates rather than measures
    skipped: int = 0  # proposals the candidate filter skipped (:mod:`tunewise.filters`)


POPULATION_PER_CANDIDATE = 8  # members of an evolutionary search's population for each candidate it returns
MIN_POPULATION = 128
GENERATIONS = 2  # generations an evolutionary search call evolves its population for (MetaSchedule's default: 4)
BARREN_SEARCHES = 3  # searches in a row that propose nothing new before a task's space counts as exhausted


class _TaskSearch:
    """One task's MetaSchedule search, prepared lazily on the task's first slot.

    The evolutionary search's cost is proportional to its population times its generations: each generation
    mutates every member (replaying its trace and post-processing it) and ranks the result by the cost model
    (extracting its features), some 5 ms a member and generation on a 2-core machine, and the call returns the
    best ``batch``. So each call evolves a population of ``POPULATION_PER_CANDIDATE`` times ``batch`` (at least
    ``MIN_POPULATION``: MetaSchedule seeds 50 of its members at random), MetaSchedule's own ratio (512 for 64),
    and ``batch`` is one slot's worth: a scheduler that moves on after one slot leaves nothing searched unused,
    where a fixed population of 512 for 64 candidates costs 10-12 s of which a slot of 16 uses a quarter. It
    evolves for ``GENERATIONS`` generations rather than MetaSchedule's four: a call costs about 60 % as much,
    and on MobileNetV2 a run made 1.3x the trials in the same time with an estimate no worse at equal trials,
    while on ResNet-18, where building and measuring dominate a slot, the estimate at equal trials was up to
    10 % higher (bench/README, "Two generations a search call"). More generations refine the ranking by a cost
    model that has seen little of the task, and a task's next slot searches again with what this one measured.
    The search strategy and the (shared) cost model are told each slot's results at once. Waiting for a larger
    batch, as the stock loop does, would leave the cost model untrained all run long whenever tasks get few
    trials each (600 trials over ResNet-18's 22 tasks); MetaSchedule's XGBoost model retrains only once its data
    has grown by a fifth, so this costs little.

    While the run's cost model has learnt nothing (no trial measured yet), a slot's candidates are drawn at
    random from the design space instead (MetaSchedule's ``replay-trace``, :meth:`sample`): the evolutionary
    search would rank its population by the untrained model, to the same effect, and its first batch takes
    12-20 s even for a small convolution on a 2-core machine, against 0.3 s. The evolutionary search then starts
    on the task's next slot, seeded by what was measured.

    The search remembers what it proposed in this process only: in a resumed run, the records it seeds its
    population with from the database can be proposed again, once each. So candidates whose scheduled module
    is in ``seen`` (structural hashes, those measured by earlier sessions of the run included) are dropped
    (``duplicates`` counts them) and the search runs again until the slot is full: a slot is short only when the
    space is exhausted (no candidates, or ``BARREN_SEARCHES`` searches in a row with nothing new).
    """

    def __init__(self, mod, name: str, target, seed: int, num_threads: int, batch: int):
        from tunewise.tasks import args_info

        self.mod, self.name, self.target = mod, name, target
        self.args_info = args_info(mod)
        self.seed, self.num_threads, self.batch = seed, num_threads, batch
        self.context = None
        self._told = None  # the context that proposed the slot's candidates: it is told their results
        self.seen: set[str] = set()
        self.duplicates = 0
        self.earlier: list[StoredTrial] = []  # this task's trials from earlier sessions of the run
        self._queue: list = []

    def _prepare(self, database, cost_model, max_trials: int) -> None:
        from tvm.s_tir import meta_schedule as ms

        population = max(MIN_POPULATION, POPULATION_PER_CANDIDATE * self.batch)
        self.context = ms.TuneContext(
            self.mod, target=self.target, space_generator=spaces.generator(self.mod, self.target),
            search_strategy=ms.search_strategy.EvolutionarySearch(population_size=population,
                                                                     genetic_num_iters=GENERATIONS),
            task_name=self.name, rand_state=self.seed,
            num_threads=self.num_threads, logger=ms.logging.get_logger("tunewise.search"),
        ).clone()
        self.context.pre_tuning(max_trials, self.batch, self.context.generate_design_space(), database,
                                cost_model)
        if self.earlier:  # a resumed run: the cost model learns what it had learnt from these
            records = [database.record(t) for t in self.earlier]
            cost_model.update(self.context, [r.as_measure_candidate() for r in records],
                              [_runner_result(t) for t in self.earlier])
            self.earlier = []

    def propose(self, n: int, database, cost_model, max_trials: int, *, untrained: bool = False
                ) -> list[tuple[object, str]]:
        """Up to ``n`` ``(candidate, hash)`` never measured in the run; none when the space is exhausted. With
        ``untrained`` (the cost model has learnt nothing) a task whose search has not started samples them."""
        if untrained and self.context is None:
            sampled = self.sample(n, database, cost_model)
            if sampled:
                return sampled
        if self.context is None:
            self._prepare(database, cost_model, max_trials)
        self._told = self.context
        barren = 0  # searches in a row that found nothing new
        while len(self._queue) < n and barren < BARREN_SEARCHES:
            batch = self.context.generate_measure_candidates()
            if batch is None:
                break
            fresh = self._unseen(batch)
            self._queue.extend(fresh)
            barren = 0 if fresh else barren + 1
        taken, self._queue = self._queue[:n], self._queue[n:]
        return taken

    def searches(self, n: int, *, untrained: bool) -> bool:
        """Whether proposing ``n`` candidates runs the evolutionary search (it has not started, or fewer than
        ``n`` are queued), rather than sampling or taking queued candidates."""
        return not (untrained and self.context is None) and len(self._queue) < n

    def sample(self, n: int, database, cost_model) -> list[tuple[object, str]]:
        """Up to ``n`` ``(candidate, hash)`` drawn at random from the task's design space, never measured in the
        run."""
        from tvm.s_tir import meta_schedule as ms

        context = ms.TuneContext(
            self.mod, target=self.target, space_generator=spaces.generator(self.mod, self.target),
            search_strategy="replay-trace",
            task_name=self.name, rand_state=self.seed, num_threads=self.num_threads,
            logger=ms.logging.get_logger("tunewise.search"),
        ).clone()
        context.pre_tuning(n, n, context.generate_design_space(), database, cost_model)
        self._told = context
        return self._unseen(context.generate_measure_candidates() or [])

    def adopt(self, schedules, database, cost_model, max_trials: int) -> list[tuple[object, str]]:
        """``(candidate, hash)`` for each schedule of this task made elsewhere (transferred from a group-mate)
        that the run has not measured."""
        from tvm.s_tir import meta_schedule as ms

        if not schedules:
            return []
        if self.context is None:  # its cost model and search state are told the results
            self._prepare(database, cost_model, max_trials)
        self._told = self.context
        return self._unseen([ms.MeasureCandidate(sch, self.args_info) for sch in schedules])

    def _unseen(self, candidates) -> list[tuple[object, str]]:
        from tunewise.stores._database import module_hash

        fresh = []
        for candidate in candidates:
            key = module_hash(candidate.sch.mod)
            if key in self.seen:
                self.duplicates += 1
            else:
                self.seen.add(key)
                fresh.append((candidate, key))
        return fresh

    def notify(self, candidates, results, cost_model) -> None:
        self._told.notify_runner_results(candidates, results)
        cost_model.update(self._told, candidates, results)


def _runner_result(trial: StoredTrial):
    from tvm.s_tir import meta_schedule as ms

    return ms.runner.RunnerResult(list(trial.run_secs) if not trial.error else None,
                                  None if not trial.error else f"{trial.error}: {trial.message}")


class Session:
    """Tunes an :class:`~tunewise.tasks.ExtractedModel` under a budget with a task scheduler: the driver of a
    :class:`~tunewise.ledger.Ledger` that measures for real.

    Trials are recorded as run ``run`` of ``store`` (a :class:`~tunewise.stores.Store`), which must exist;
    the model's tasks are added to the run, or, when the run has some, checked against them and the run is
    resumed from what the store holds (with the default latencies it stored). Each call of a task's evolutionary
    search returns ``search_batch`` candidates (default: ``trials_per_slot``). ``model``'s default latencies,
    when unmeasured, are measured by the session (:attr:`model` has them after the first slot of
    :meth:`run`). ``database`` is the MetaSchedule view of the store the searches use (for compiling with the
    results). ``callbacks`` (:mod:`tunewise.callbacks`: instances or names) are told
    every recorded slot and every phase of the slot in flight. ``owner`` names the process that owns the run
    (:class:`tunewise.lease.Lease`). ``deadline``, when given, maps a snapshot of the run to the
    ``time.perf_counter()`` instant by which tuning must end (a whole command's budget, less what is left to
    do after tuning). ``stoppers`` are the ledger's stop rules (:mod:`tunewise.stoppers`). ``meter``
    (:mod:`tunewise.energy`) meters the run: each slot's joules are stored with its checkpoint, and the stop
    rules see the run's energy. ``checker`` (:class:`~tunewise.checks.ModelCheck`) measures the whole model
    between slots when it is due; each point is stored (:meth:`~tunewise.stores.Store.add_model_latency`)
    and told to the ledger. ``candidate_filter`` (:mod:`tunewise.filters`) is told every measured trial and
    skips proposals before they are measured; the search proposes others in their place (transferred
    schedules are never skipped), and each slot's skipped count is stored with it. ``share`` is a
    :data:`tunewise.sharing.MODES` name and ``warm_start`` lets new tasks start from other runs' records (see
    the module docstring).
    """

    def __init__(self, model, scheduler, budget: Budget, measurer, store, run: int, *, trials_per_slot: int = 16,
                 search_batch: int | None = None, cost_model=None, seed: int = 0, share: str = "same-anchor",
                 warm_start: bool = True,
                 callbacks: Sequence[Callback | str] = (), owner: str | None = None,
                 deadline: Callable[[Snapshot], float] | None = None, stoppers: Sequence = (),
                 meter: EnergyMeter | None = None, checker: ModelCheck | None = None,
                 candidate_filter: CandidateFilter | None = None):
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
        self.cost_model = cost_models.create(cost_model or "xgb", **({} if isinstance(cost_model, ms.CostModel)
                                             else {"seed": seed, "num_tuning_cores": num_threads}))
        self.callbacks = CallbackList(callbacks)
        self.pace = timebudget.SlotPace()
        self.trials: list[StoredTrial] = []
        self._searches = [_TaskSearch(m, t.name, model.target, seed + i + 1, num_threads,
                                      search_batch or trials_per_slot)
                          for i, (t, m) in enumerate(zip(model.tasks, model.task_mods, strict=True))]
        self._workloads = [self.database.workload_id(m, commit=True) for m in model.task_mods]
        self.share, self.warm_start = share, warm_start
        self.offers = (sharing.Offers([sharing.anchor_key(m) for m in model.task_mods]) if share == "same-anchor"
                       else None)
        self.selection: sharing.Selection | None = None  # the groups of selective tuning, once chosen
        self._signatures: dict[int, sharing.Signature] = {}
        self._destinations: dict[int, sharing.Destination] = {}  # what a transfer to task k needs of it
        self._foreign: list[tuple[int, sharing.Signature]] | None = None  # other workloads' best records
        self.shared = 0  # trials that were transferred schedules
        self._offset = 0.0  # tuning time of earlier sessions of the run
        self._start = None
        self.meter, self.checker, self.filter = meter, checker, candidate_filter
        self.skipped = 0  # proposals the filter skipped in this process
        self._joules_offset = 0.0  # energy of earlier sessions of the run
        self._meter_start = None if meter is None else meter.read().joules
        self.ledger = Ledger(
            model.tasks, scheduler, budget, trials_per_slot=trials_per_slot, clock=lambda: self.elapsed,
            seconds_left=None if deadline is None else (lambda snapshot: deadline(snapshot) - time.perf_counter()),
            pace=self.pace, searching=lambda k, n: self._searches[k].searches(n, untrained=not self.trials),
            stoppers=stoppers, joules=None if meter is None else self.joules)
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
    def duplicates(self) -> int:
        """Candidates the searches proposed although the run had measured them already (skipped)."""
        return sum(s.duplicates for s in self._searches)

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
        by_slot = defaultdict(list)
        for trial in self.store.get_trials(self.run_id):
            by_slot[trial.slot].append(trial)
        for point in self.store.get_model_latencies(self.run_id):
            self.ledger.tell_model_latency(point.latency, at=point.elapsed)
            self._joules_offset += point.joules or 0.0
            if self.checker is not None:
                self.checker.checked(point.elapsed, point.seconds)
        for checkpoint in self.store.get_checkpoints(self.run_id):
            self._offset = max(self._offset, checkpoint.elapsed)
            self._joules_offset += checkpoint.joules or 0.0
            if checkpoint.trials == 0:  # the task's space was exhausted
                self.ledger.tell(self.ledger.recorded(checkpoint.slot, checkpoint.task, 0), [])
                continue
            if checkpoint.slot not in by_slot:  # a slot stored twice: its trials are all told once
                continue
            trials = by_slot.pop(checkpoint.slot)
            slot = self.ledger.recorded(checkpoint.slot, checkpoint.task, len(trials))
            for k in sorted({t.task for t in trials}):
                mine = [t for t in trials if t.task == k]
                self.ledger.tell(dataclasses.replace(slot, task=k), [t.latency for t in mine])
                self._searches[k].seen.update(t.candidate for t in mine)
                self._searches[k].earlier += mine
            self.trials += trials
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
        if self.share != "selective":
            return
        signatures = [self._signature(k) for k in range(len(self.model.tasks))]
        self.selection = sharing.select_tasks(self.model.tasks, signatures)
        self.ledger.set_members(sharing.Members(self.selection.source, sharing.flop_shares(self.model.tasks)))

    def _signature(self, k: int) -> sharing.Signature:
        if k not in self._signatures:
            self._signatures[k] = sharing.task_signature(self.model.task_mods[k], self.model.target)
        return self._signatures[k]

    def _destination(self, k: int) -> sharing.Destination:
        if k not in self._destinations:
            self._destinations[k] = sharing.destination(self.model.task_mods[k], self.model.target)
        return self._destinations[k]

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
            with contextlib.suppress(Exception):  # a full disk: ``err`` says so, and the run shows as dead
                self.store.set_status(self.run_id, stores.INTERRUPTED if isinstance(err, KeyboardInterrupt)
                                      else stores.FAILED)
            raise
        self.store.set_status(self.run_id, stores.TUNED)
        return self.snapshot()

    def check_model(self) -> None:
        """Measure the whole model with the best records so far, now (the session's
        :class:`~tunewise.checks.ModelCheck`, which the session must have; between slots, :meth:`run` does when
        the check is due); store the point and tell the ledger and the callbacks."""
        self.callbacks.phase("compiling and timing the model with the best records so far")
        start, joules = time.perf_counter(), self.joules()
        latency, message = self.checker.measure(self.model, self.database)
        point = stores.ModelLatency(self.elapsed, self.ledger.trials, latency, time.perf_counter() - start,
                                    None if self.meter is None else self.joules() - joules, message)
        self.store.add_model_latency(self.run_id, point)
        self.ledger.tell_model_latency(latency, at=point.elapsed)
        self.checker.checked(point.elapsed, point.seconds)
        self.callbacks.model_measured(point, self.snapshot())

    def _open(self) -> None:
        """Slot 0 of a new run, to the heaviest task by FLOPs, with the default latencies measured after its
        candidates (:meth:`_run_slot`); only the default latencies when no time is left for a slot."""
        snapshot = self.snapshot()
        first = schedulers.heaviest_by_flops(snapshot.tasks)
        if self.ledger.seconds_left() <= 0:
            self._measure_defaults()
            return
        self._run_slot(Slot(0, first.index, slot_size(snapshot, first)), opening=True)

    def _run_slot(self, slot: Slot, *, opening: bool = False) -> None:
        """Propose, measure and record ``slot``. An ``opening`` slot (the ledger did not hand it out) is followed
        by the default latencies, and then recorded as the run's choice (:meth:`Ledger.recorded`)."""
        k, n, search = slot.task, slot.n, self._searches[slot.task]
        searching = slot.source is None and search.searches(n, untrained=not self.trials)
        before = dataclasses.replace(self.snapshot(), slot=slot.index)  # the run as the slot in flight found it

        readings = {}  # the run's joules as each phase of the slot began

        def on_phase(phase: str) -> None:
            readings[phase] = self.joules()
            self.callbacks.slot_phase(before, k, phase)

        on_phase("search")
        slot_start, slot_joules = time.perf_counter(), readings["search"]
        max_trials = self.budget.per_task_trials or self.budget.max_trials or 1_000_000
        if slot.source is not None:  # a held member's transfer slot: its representative's records, or nothing
            shared = search.adopt(self._member_transfers(k, slot.source, n), self.database, self.cost_model,
                                  max_trials)
            proposed = shared
        else:
            shared = search.adopt(self._transfers(k, n) or self._warm(k, n), self.database, self.cost_model,
                                  max_trials)
            proposed = shared or search.propose(n, self.database, self.cost_model, max_trials,
                                                untrained=not self.trials)
        skipped = 0
        if self.filter is not None and proposed and not shared:
            proposed, skipped = self._unfiltered(k, n, proposed, max_trials)
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
        if not proposed:  # space exhausted (or no room left under the per-task budget); a member falls back
            self.ledger.tell(slot, [])
            self.store.add_trials(self.run_id, [], Checkpoint(
                slot.index, k, 0, self.elapsed, time.perf_counter() - slot_start,
                self.snapshot().estimated_latency(), self._slot_joules(slot_joules), skipped, phase_joules),
                owner=self.owner)
            self.skipped += skipped
            return
        now, target, workload = time.time(), str(self.model.target), self.database.workload(self._workloads[k])
        trials = [StoredTrial(self._workloads[k], _record_json(c, m, workload, self.model.target), m.run_secs,
                              m.error, m.message, k, slot.index, target, key, m.build_seconds, m.run_seconds, now)
                  for (c, key), m in zip(proposed, measurements, strict=True)]
        self.ledger.tell(slot, [t.latency for t in trials])
        self.trials += trials
        self.shared += len(shared)
        elapsed, latency = self.history[-1]  # what the ledger recorded for the slot
        self.store.add_trials(self.run_id, trials, Checkpoint(
            slot.index, k, len(trials), elapsed, time.perf_counter() - slot_start, latency,
            self._slot_joules(slot_joules), skipped, phase_joules), owner=self.owner)
        self.skipped += skipped
        search.notify(candidates, [_runner_result(t) for t in trials], self.cost_model)
        if self.filter is not None:
            self.filter.tell([Measured(t.workload, t.record, t.latency) for t in trials])
        reading = None if self.meter is None else self.meter.read()
        event = SlotEvent(slot.index, k, len(trials), sum(t.error is not None for t in trials), best_before,
                          self.ledger.best(k), time.perf_counter() - slot_start, search_seconds, measure_seconds,
                          slot.decision_seconds, len(shared), self._slot_joules(slot_joules),
                          None if reading is None else self.joules(), reading is not None and reading.estimated,
                          skipped)
        self.pace.record(searching=searching, trials=len(trials), measure_seconds=measure_seconds,
                         fixed=slot.decision_seconds + event.seconds - measure_seconds)
        self.callbacks.slot_recorded(event, self.snapshot())

    def _unfiltered(self, k: int, n: int, proposed: list, max_trials: int) -> tuple[list, int]:
        """The proposals of task ``k`` the filter keeps, the skipped ones replaced by further proposals (three
        rounds at most), up to ``n``; and how many were skipped. When it skips them all, the first is kept: a
        slot measures something, and a task is finished only when its space is exhausted."""
        search, workload_id = self._searches[k], self._workloads[k]
        workload, target = self.database.workload(workload_id), self.model.target
        kept, skipped = [], []
        for _ in range(3):
            flags = self.filter.skip(workload_id, [_proposal_json(c, workload, target) for c, _ in proposed])
            kept += [p for p, skip in zip(proposed, flags, strict=True) if not skip]
            skipped += [p for p, skip in zip(proposed, flags, strict=True) if skip]
            if len(kept) >= n or not any(flags):
                break
            proposed = search.propose(n - len(kept), self.database, self.cost_model, max_trials)
            if not proposed:
                break
        if not kept:
            kept, skipped = skipped[:1], skipped[1:]
        return kept[:n], len(skipped)

    def _slot_joules(self, at_start: float) -> float | None:
        return None if self.meter is None else self.joules() - at_start

    def _transfers(self, k: int, n: int) -> list:
        """Up to ``n`` schedules of task ``k`` transferred from the best records of its group-mates that beat
        its best so far and were not offered to it before (:class:`tunewise.sharing.Offers`)."""
        if self.offers is None or not self.offers.shares(k):
            return []

        def records_of(j: int, top: int):
            return [(t.candidate or t.record, t.latency, t)  # imported records have no candidate hash
                    for t in self.store.top_trials(self._workloads[j], top, self.database.target)]

        schedules = []
        for candidate, trial in self.offers.pending(k, self.ledger.best(k), records_of)[:n]:
            self.offers.given(k, candidate)
            sch = sharing.transfer(self.database.record(trial).trace, self.model.task_mods[k], self.model.target)
            if sch is not None:
                schedules.append(sch)
        return schedules


    def _member_transfers(self, k: int, source: int, n: int) -> list:
        """Up to ``n`` schedules of held member ``k`` made from the best records of its representative ``source``
        (fitted to its shape), none of them measured in the run: the next records are tried in place of those
        that do not transfer or were measured already, up to ``n + 4`` records."""
        from tunewise.stores._database import module_hash

        mod, target, seen = self.model.task_mods[k], self.model.target, self._searches[k].seen
        to = self._destination(k)
        schedules, keys = [], set()
        for trial in self.store.top_trials(self._workloads[source], n + 4, self.database.target):
            sch = sharing.transfer_across(self.database.record(trial).trace, mod, target, to)
            if sch is not None and (key := module_hash(sch.mod)) not in seen and key not in keys:
                schedules.append(sch)
                keys.add(key)
                if len(schedules) == n:
                    break
        return schedules

    def _warm(self, k: int, n: int) -> list:
        """With warm start, for a task that has no trial in the run yet: schedules made from the best record of
        each of the (at most ``n``, at most 4) stored workloads of other tasks most similar to it, fitted to
        its shape."""
        if not self.warm_start or self.ledger.snapshot().tasks[k].trials or self._searches[k].seen:
            return []
        if self._foreign is None:
            own, target = set(self._workloads), self.database.target
            self._foreign = [(w, sharing.record_signature(best[0].record))
                             for w in self.store.ranked_workloads(target) if w not in own
                             and (best := self.store.top_trials(w, 1, target))]
        if not self._foreign:
            return []
        mod, target = self.model.task_mods[k], self.model.target
        schedules = []
        for workload in sharing.warm_sources(self._signature(k), self._foreign, limit=min(n, 4)):
            trial = self.store.top_trials(workload, 1, self.database.target)[0]
            sch = sharing.transfer_across(self.database.record(trial).trace, mod, target, self._destination(k))
            if sch is not None:
                schedules.append(sch)
        return schedules


def _proposal_json(candidate, workload, target) -> str:
    """MetaSchedule's JSON text of the tuning record of a candidate not yet measured."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise.stores._database import record_json

    return record_json(ms.database.TuningRecord(candidate.sch.trace, workload, None, target, candidate.args_info))


def _record_json(candidate, measurement, workload, target) -> str:
    """MetaSchedule's JSON text of the tuning record of a measured candidate."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise.stores._database import record_json

    return record_json(ms.database.TuningRecord(candidate.sch.trace, workload, list(measurement.run_secs) or None,
                                                target, candidate.args_info))
