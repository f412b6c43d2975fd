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

    - Each call evolves a population of ``POPULATION_PER_CANDIDATE`` times ``batch`` (at least
      ``MIN_POPULATION``; MetaSchedule's ratio) for ``GENERATIONS`` generations, with at most ``RANDOM_MEMBERS``
      random members in a first population, and ``batch`` is one slot's worth, so a scheduler that moves on
      leaves nothing searched unused (evidence: bench/studies/search/findings.md).
    - The search strategy and the shared cost model are told each slot's results at once.
    - While the run's cost model has learnt nothing, a slot's candidates are drawn at random from the design
      space (MetaSchedule's ``replay-trace``, :meth:`sample`); the evolutionary search starts on the task's next
      slot, seeded by what was measured.
    - Candidates whose scheduled module is in ``seen`` (structural hashes, earlier sessions of the run included)
      are dropped (``duplicates`` counts them) and the search runs again until the slot is full: a slot is short
      only when the space is exhausted (no candidates, or ``BARREN_SEARCHES`` searches in a row with nothing new).
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
