"""What a task's next slot is given from elsewhere: the schedules that sharing plans for it, made from records
the store holds.

The loop asks a :class:`Planner` before it searches a task, and measures what it returns instead of searching
when that is not empty: the group-mates' best records under ``"same-anchor"`` (:meth:`Planner.transfers`), the
representative's best records fitted to a held member's shape under ``"selective"``
(:meth:`Planner.member_transfers`), and for a task that has no trial yet, the best records of the most similar
workloads other runs stored (with warm start) and a record base's records (:meth:`Planner.warm`). Under
``"selective"`` it also groups the tasks once their default latencies are known (:meth:`Planner.select`).
"""

from __future__ import annotations

from tunewise.sharing._anchor import Offers, anchor_key, transfer
from tunewise.sharing._members import Members
from tunewise.sharing._record_base import BaseIndex
from tunewise.sharing._selection import Selection, flop_shares, select_tasks
from tunewise.sharing._similarity import Signature, record_signature, task_signature
from tunewise.sharing._transfer import Destination, destination, transfer_across
from tunewise.sharing._warm import warm_sources

WARM_SOURCES = 4  # the most other workloads a task's first slot starts from


class Planner:
    """The sharing of one run: ``mode`` (a :data:`tunewise.sharing.MODES` name) and ``warm_start`` for the
    tasks of ``model`` (an :class:`~tunewise.lowering.tasks.ExtractedModel`), whose workloads are stored in ``store`` as
    ``workloads``; ``database`` (:class:`~tunewise.stores.StoreDatabase`) turns stored trials into records.
    ``base`` is the record base the warm start reads beside the store (``None``: none); :attr:`from_base` holds
    the module hashes of the schedules made from its records."""

    def __init__(self, model, mode: str, warm_start: bool, store, database, workloads, base: BaseIndex | None = None):
        self.model, self.mode, self.warm_start, self.base = model, mode, warm_start, base
        self.store, self.database, self.workloads = store, database, workloads
        self.from_base: set[str] = set()
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
        """Up to ``n`` schedules of task ``k`` made elsewhere, for a task that has no trial in the run yet (the
        loop asks only then), in this order: when the store holds no record of ``k``'s workload, the base's
        records of that same workload, as they are, and nothing else when there are such; with warm start,
        the best record of each of the stored workloads of other tasks most similar to ``k``; when the store
        holds none of ``k``'s, the best record of each of the base's most similar workloads; at most
        :data:`WARM_SOURCES` similar workloads in all, their records fitted to ``k``'s shape. The user's store
        wins: with records of ``k``'s workload, the search seeds from those and the base is not read."""
        from tunewise.stores._database import module_hash

        target = self.database.target
        use_base = self.base is not None and not self.store.top_trials(self.workloads[k], 1, target)
        made: dict[str, object] = {}  # module hash -> schedule, in the order made
        if use_base:
            for sch in self._base_same(k):
                made.setdefault(module_hash(sch.mod), sch)
            self.from_base.update(list(made)[:n])
            if made:  # records of this very workload beat any fitted from others, and keep the first slot short
                return list(made.values())[:n]
        similar = 0
        if self.warm_start:
            if self._foreign is None:
                own = set(self.workloads)
                self._foreign = [(w, record_signature(best[0].record))
                                 for w in self.store.ranked_workloads(target) if w not in own
                                 and (best := self.store.top_trials(w, 1, target))]
            for workload in warm_sources(self._signature(k), self._foreign,
                                         limit=max(0, min(n - len(made), WARM_SOURCES))) if self._foreign else []:
                trial = self.store.top_trials(workload, 1, target)[0]
                sch = self._fitted(k, self.database.record(trial).trace)
                if sch is not None:
                    made.setdefault(module_hash(sch.mod), sch)
                    similar += 1
        if use_base and len(made) < n and similar < WARM_SOURCES:
            workloads = self.base.load()
            for i in warm_sources(self._signature(k), self.base.signatures(),
                                  limit=min(n - len(made), WARM_SOURCES - similar)):
                sch = self._fitted(k, _trace(workloads[i].records[0].record, workloads[i].mod))
                if sch is not None and (key := module_hash(sch.mod)) not in made:
                    made[key] = sch
                    self.from_base.add(key)
        return list(made.values())[:n]

    def _base_same(self, k: int) -> list:
        """Schedules of task ``k`` from the base's records of its own workload, fastest first, replayed on its
        module as they are; those that do not replay on it are left out."""
        import tvm

        mod, schedules = self.model.task_mods[k], []
        for workload in self.base.same(mod):
            for record in workload.records:
                trace = _trace(record.record, mod)
                if trace is None:
                    continue
                try:
                    sch = tvm.s_tir.Schedule(mod)
                    trace.apply_to_schedule(sch, remove_postproc=False)
                except Exception:  # TVM raises ScheduleError, InternalError... when a trace does not replay
                    continue
                schedules.append(sch)
        return schedules

    def _fitted(self, k: int, trace):
        return None if trace is None else transfer_across(trace, self.model.task_mods[k], self.model.target,
                                                          self._destination(k))

    def _signature(self, k: int) -> Signature:
        if k not in self._signatures:
            self._signatures[k] = task_signature(self.model.task_mods[k], self.model.target)
        return self._signatures[k]

    def _destination(self, k: int) -> Destination:
        if k not in self._destinations:
            self._destinations[k] = destination(self.model.task_mods[k], self.model.target)
        return self._destinations[k]


def _trace(record: str, mod):
    """The trace of a record (MetaSchedule's JSON text) made on module ``mod`` (a TIR module, or its TVM JSON),
    or ``None`` when it does not replay on it."""
    import json

    import tvm
    from tvm.s_tir import meta_schedule as ms

    try:
        workload = ms.database.Workload(tvm.ir.load_json(mod) if isinstance(mod, str) else mod)
        return ms.database.TuningRecord.from_json(json.loads(record), workload).trace
    except Exception:  # TVM raises ScheduleError, InternalError... when a trace does not replay
        return None
