"""What a task's next slot is given from elsewhere: the schedules that sharing plans for it, made from records
the store holds.

The loop asks a :class:`Planner` before it searches a task, and measures what it returns instead of searching
when that is not empty: the group-mates' best records under ``"same-anchor"`` (:meth:`Planner.transfers`), the
representative's best records fitted to a held member's shape under ``"selective"``
(:meth:`Planner.member_transfers`), and with warm start, for a task that has no trial yet, the best records of
the most similar workloads other runs stored (:meth:`Planner.warm`). Under ``"selective"`` it also groups the
tasks once their default latencies are known (:meth:`Planner.select`).
"""

from __future__ import annotations

from tunewise.sharing._anchor import Offers, anchor_key, transfer
from tunewise.sharing._members import Members
from tunewise.sharing._selection import Selection, flop_shares, select_tasks
from tunewise.sharing._similarity import Signature, record_signature, task_signature
from tunewise.sharing._transfer import Destination, destination, transfer_across
from tunewise.sharing._warm import warm_sources

WARM_SOURCES = 4  # the most other workloads a task's first slot starts from


class Planner:
    """The sharing of one run: ``mode`` (a :data:`tunewise.sharing.MODES` name) and ``warm_start`` for the
    tasks of ``model`` (an :class:`~tunewise.tasks.ExtractedModel`), whose workloads are stored in ``store`` as
    ``workloads``; ``database`` (:class:`~tunewise.stores.StoreDatabase`) turns stored trials into records."""

    def __init__(self, model, mode: str, warm_start: bool, store, database, workloads):
        self.model, self.mode, self.warm_start = model, mode, warm_start
        self.store, self.database, self.workloads = store, database, workloads
        self.offers = Offers([anchor_key(m) for m in model.task_mods]) if mode == "same-anchor" else None
        self.selection: Selection | None = None  # the groups of selective tuning, once chosen
        self._signatures: dict[int, Signature] = {}
        self._destinations: dict[int, Destination] = {}  # what a transfer to task k needs of it
        self._foreign: list[tuple[int, Signature]] | None = None  # other workloads' best records

    def select(self, tasks) -> Members | None:
        """Under ``"selective"``, the groups of ``tasks`` (default latencies known) and the members held, which
        the ledger is told; ``None`` in the other modes."""
        if self.mode != "selective":
            return None
        self.selection = select_tasks(tasks, [self._signature(k) for k in range(len(tasks))])
        return Members(self.selection.source, flop_shares(tasks))

    def transfers(self, k: int, n: int, best: float) -> list:
        """Up to ``n`` schedules of task ``k`` transferred from the best records of its group-mates that beat
        ``best`` (its best so far) and were not offered to it before (:class:`~tunewise.sharing.Offers`)."""
        if self.offers is None or not self.offers.shares(k):
            return []

        def records_of(j: int, top: int):
            return [(t.candidate or t.record, t.latency, t)  # imported records have no candidate hash
                    for t in self.store.top_trials(self.workloads[j], top, self.database.target)]

        schedules = []
        for candidate, trial in self.offers.pending(k, best, records_of)[:n]:
            self.offers.given(k, candidate)
            sch = transfer(self.database.record(trial).trace, self.model.task_mods[k], self.model.target,
                           self._destination(k))
            if sch is not None:
                schedules.append(sch)
        return schedules

    def member_transfers(self, k: int, source: int, n: int, seen: set[str]) -> list:
        """Up to ``n`` schedules of held member ``k`` made from the best records of its representative
        ``source`` (fitted to its shape), none of them in ``seen`` (the module hashes the run measured): the
        next records are tried in place of those that do not transfer or were measured, up to ``n + 4``."""
        from tunewise.stores._database import module_hash

        mod, target, to = self.model.task_mods[k], self.model.target, self._destination(k)
        schedules, keys = [], set()
        for trial in self.store.top_trials(self.workloads[source], n + 4, self.database.target):
            sch = transfer_across(self.database.record(trial).trace, mod, target, to)
            if sch is not None and (key := module_hash(sch.mod)) not in seen and key not in keys:
                schedules.append(sch)
                keys.add(key)
                if len(schedules) == n:
                    break
        return schedules

    def warm(self, k: int, n: int) -> list:
        """With warm start: schedules of task ``k`` made from the best record of each of the (at most ``n``,
        at most :data:`WARM_SOURCES`) stored workloads of other tasks most similar to it, fitted to its shape.
        The loop asks only for a task that has no trial in the run yet."""
        if not self.warm_start:
            return []
        if self._foreign is None:
            own, target = set(self.workloads), self.database.target
            self._foreign = [(w, record_signature(best[0].record))
                             for w in self.store.ranked_workloads(target) if w not in own
                             and (best := self.store.top_trials(w, 1, target))]
        if not self._foreign:
            return []
        mod, target = self.model.task_mods[k], self.model.target
        schedules = []
        for workload in warm_sources(self._signature(k), self._foreign, limit=min(n, WARM_SOURCES)):
            trial = self.store.top_trials(workload, 1, self.database.target)[0]
            sch = transfer_across(self.database.record(trial).trace, mod, target, self._destination(k))
            if sch is not None:
                schedules.append(sch)
        return schedules

    def _signature(self, k: int) -> Signature:
        if k not in self._signatures:
            self._signatures[k] = task_signature(self.model.task_mods[k], self.model.target)
        return self._signatures[k]

    def _destination(self, k: int) -> Destination:
        if k not in self._destinations:
            self._destinations[k] = destination(self.model.task_mods[k], self.model.target)
        return self._destinations[k]
