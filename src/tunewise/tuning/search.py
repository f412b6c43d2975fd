"""A task's MetaSchedule search, adapted to the loop: proposals never measured in the run, random samples while
the cost model is untrained, schedules made elsewhere adopted, results told back; and the JSON of the records
the store keeps.
"""

from __future__ import annotations

from tunewise.lowering import spaces
from tunewise.stores import StoredTrial

POPULATION_PER_CANDIDATE = 8  # members of an evolutionary search's population for each candidate it returns
MIN_POPULATION = 16
RANDOM_MEMBERS = 50  # random members of a search's first population at most (MetaSchedule's init_min_unmeasured)
GENERATIONS = 2  # generations an evolutionary search call evolves its population for (MetaSchedule's default: 4)
BARREN_SEARCHES = 3  # searches in a row that propose nothing new before a task's space counts as exhausted


class TaskSearch:
    """One task's MetaSchedule search, prepared lazily on the task's first slot.

    The evolutionary search's cost is proportional to its population times its generations: each generation
    mutates every member (replaying its trace and post-processing it) and ranks the result by the cost model
    (extracting its features), some 5 ms a member and generation on a 2-core machine, and the call returns the
    best ``batch``. So each call evolves a population of ``POPULATION_PER_CANDIDATE`` times ``batch`` (at least
    ``MIN_POPULATION``), MetaSchedule's own ratio (512 for 64), and ``batch`` is one slot's worth: a scheduler
    that moves on after one slot leaves nothing searched unused, where a fixed population of 512 for 64
    candidates costs 10-12 s of which a slot of 16 uses a quarter. MetaSchedule samples at least
    ``init_min_unmeasured`` random members for a search's first population: ``RANDOM_MEMBERS``, at most half
    the population, so that a small slot's search costs what its population does (bench/studies/search/findings.md, "The
    population of a small slot's search").

    Each call evolves for ``GENERATIONS`` generations rather than MetaSchedule's four: a call costs about 60 %
    as much, and on MobileNetV2 a run made 1.3x the trials in the same time with an estimate no worse at equal
    trials, while on ResNet-18, where building and measuring dominate a slot, the estimate at equal trials was up to
    10 % higher (bench/studies/search/findings.md, "Two generations a search call"). More generations refine the ranking
    by a cost model that has seen little of the task, and a task's next slot searches again with what this one measured.
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
        self.mod, self.name, self.target = mod, name, target
        self.seed, self.num_threads, self.batch = seed, num_threads, batch
        self.context = None
        self._measuring = None  # the context that proposed the slot's candidates: it is told their results
        self.seen: set[str] = set()
        self.duplicates = 0
        self.earlier: list[StoredTrial] = []  # this task's trials from earlier sessions of the run
        self._queue: list = []

    def _prepare(self, database, cost_model, max_trials: int) -> None:
        from tvm.s_tir import meta_schedule as ms

        population = max(MIN_POPULATION, POPULATION_PER_CANDIDATE * self.batch)
        self.context = ms.TuneContext(
            self.mod, target=self.target, space_generator=spaces.generator(self.mod, self.target),
            search_strategy=ms.search_strategy.EvolutionarySearch(
                population_size=population, init_min_unmeasured=min(RANDOM_MEMBERS, population // 2),
                genetic_num_iters=GENERATIONS),
            task_name=self.name, rand_state=self.seed,
            num_threads=self.num_threads, logger=ms.logging.get_logger("tunewise.tuning.search"),
        ).clone()
        self.context.pre_tuning(max_trials, self.batch, self.context.generate_design_space(), database,
                                cost_model)
        if self.earlier:  # a resumed run: the cost model learns what it had learnt from these
            records = [database.record(t) for t in self.earlier]
            cost_model.update(self.context, [r.as_measure_candidate() for r in records],
                              [runner_result(t) for t in self.earlier])
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
        self._measuring = self.context
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

    def propose_unskipped(self, n: int, database, cost_model, max_trials: int, candidate_filter, workload_id: int,
                          workload, *, untrained: bool = False) -> tuple[list[tuple[object, str]], int]:
        """Up to ``n`` proposals (:meth:`propose`) that ``candidate_filter`` (:mod:`tunewise.filters`) keeps, the
        skipped ones replaced by further proposals (three rounds at most), and how many it skipped. When it
        skips them all, the first is kept: a slot measures something, and a task is finished only when its space
        is exhausted. ``workload`` is the task's MetaSchedule workload, stored as ``workload_id``."""
        proposed = self.propose(n, database, cost_model, max_trials, untrained=untrained)
        kept, skipped = [], []
        for _ in range(3):
            if not proposed:
                break
            flags = candidate_filter.skip(workload_id, [proposal_json(c, workload, self.target) for c, _ in proposed])
            kept += [p for p, skip in zip(proposed, flags, strict=True) if not skip]
            skipped += [p for p, skip in zip(proposed, flags, strict=True) if skip]
            if len(kept) >= n or not any(flags):
                break
            proposed = self.propose(n - len(kept), database, cost_model, max_trials)
        if not kept:
            kept, skipped = skipped[:1], skipped[1:]
        return kept[:n], len(skipped)

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
            logger=ms.logging.get_logger("tunewise.tuning.search"),
        ).clone()
        context.pre_tuning(n, n, context.generate_design_space(), database, cost_model)
        self._measuring = context
        return self._unseen(context.generate_measure_candidates() or [])

    def adopt(self, schedules, database, cost_model, max_trials: int) -> list[tuple[object, str]]:
        """``(candidate, hash)`` for each schedule of this task made elsewhere (transferred from a group-mate)
        that the run has not measured."""
        from tvm.s_tir import meta_schedule as ms

        from tunewise.lowering.tasks import args_info

        if not schedules:
            return []
        if self.context is None:  # its cost model and search state are told the results
            self._prepare(database, cost_model, max_trials)
        self._measuring = self.context
        return self._unseen([ms.MeasureCandidate(sch, args_info(sch.mod)) for sch in schedules])

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
        self._measuring.notify_runner_results(candidates, results)
        cost_model.update(self._measuring, candidates, results)


def runner_result(trial: StoredTrial):
    """The MetaSchedule runner result of a stored trial (what the search and the cost model are told)."""
    from tvm.s_tir import meta_schedule as ms

    return ms.runner.RunnerResult(list(trial.run_secs) if not trial.error else None,
                                  None if not trial.error else f"{trial.error}: {trial.message}")


def proposal_json(candidate, workload, target) -> str:
    """MetaSchedule's JSON text of the tuning record of a candidate not yet measured."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise.stores._database import record_json

    return record_json(ms.database.TuningRecord(candidate.sch.trace, workload, None, target, candidate.args_info))


def trial_json(candidate, measurement, workload, target) -> str:
    """MetaSchedule's JSON text of the tuning record of a measured candidate."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise.stores._database import record_json

    return record_json(ms.database.TuningRecord(candidate.sch.trace, workload, list(measurement.run_secs) or None,
                                                target, candidate.args_info))
