"""MetaSchedule's database interface over a store, so that MetaSchedule reads and writes the store directly.

The evolutionary search seeds each batch from a workload's top records and ``compile_relax`` applies each
workload's best one, both through :class:`StoreDatabase`: they see every run's records of a workload, from
any model that has it. A workload is identified as MetaSchedule does: structural hash, then structural
equality of the TIR module.
"""

from __future__ import annotations

import json
import math
import time

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm_ffi import structural_equal, structural_hash

from tunewise.errors import InputError
from tunewise.stores._base import Store, StoredTrial


def module_hash(mod) -> str:
    """The structural hash of a module as 16 hex digits (how the store files workloads and candidates)."""
    return f"{structural_hash(mod) & (2**64 - 1):016x}"


def target_key(target) -> str | None:
    """The text a record's target is stored and matched under (the target's JSON)."""
    return None if target is None else str(target)


def record_json(record) -> str:
    """MetaSchedule's JSON text of a tuning record, as its JSON database writes it and reads it back, so that a
    record keeps its text through an export and an import (:mod:`tunewise.stores._exchange`) and is applied
    alike from the store and from MetaSchedule's files.

    ``TuningRecord.as_json`` cannot convert every trace: the weight layout rewrite's ``transform_layout``
    takes an ``IndexMap``, which the C++ database writes as the object's own JSON text (``tvm.ir.save_json``)
    and reads back from it; so does this. Booleans are written as the C++ database writes them: a boolean
    value (the layout rewrite's ``meta_schedule.layout_rewrite_preproc`` annotation) as an integer, which it
    reads back as one, and a boolean ``IntImm`` (``transform_layout``'s ``assume_injective_transform``) as
    ``true`` or ``false``.
    """
    return json.dumps(_plain(tvm.get_global_func("s_tir.meta_schedule.TuningRecordAsJSON")(record)))


def _plain(obj):
    """A TVM container tree as the plain JSON values MetaSchedule's JSON database writes for it (see
    :func:`record_json`); other TVM objects as their ``save_json`` text."""
    if isinstance(obj, bool):
        return int(obj)
    if obj is None or isinstance(obj, (int, float, str)):
        return obj
    if isinstance(obj, tvm.tirx.IntImm):
        return bool(obj.value) if str(obj.ty) == "bool" else obj.value
    if isinstance(obj, tvm.tirx.FloatImm):
        return obj.value
    if isinstance(obj, tvm.ir.Array):
        return [_plain(x) for x in obj]
    if isinstance(obj, tvm.ir.Map):
        return {_plain(k): _plain(v) for k, v in obj.items()}
    return tvm.ir.save_json(obj)


@derived_object
class StoreDatabase(ms.database.PyDatabase):
    """A MetaSchedule database backed by ``store``.

    ``get_top_k`` ranks by mean run seconds and skips the records MetaSchedule ignores (see
    :func:`~tunewise.stores._base.ranking_latency`) and those whose trace does not fit the module asked
    about (a structurally equal module whose blocks another model names otherwise). With ``target``, it
    ranks only the records tuned for that target: MetaSchedule does not look at a record's target, and a
    store shared by several machines would otherwise hand one machine another's schedules. Records committed
    through MetaSchedule (``commit_tuning_record``) are added as trials of ``run``; without one the database
    is read-only.
    """

    def __init__(self, store: Store, *, run: int | None = None, target=None):
        super().__init__()
        self.store = store
        self.run = run
        self.target = target_key(target)
        self._known: dict[str, list[tuple[int, object]]] = {}  # hash -> [(id, module)] seen so far
        self._workloads: dict[int, ms.database.Workload] = {}
        self._rejected: set[str] = set()  # the records :meth:`reject` was given, as :func:`record_json` texts

    def reject(self, record) -> None:
        """Leave ``record`` out of :meth:`get_top_k` from now on (in this object, not in the store): it computes
        otherwise than its task's untuned schedule (:func:`tunewise.tuning.kernel_checks.first_matching`)."""
        self._rejected.add(record_json(record))

    # -- workload ids ----------------------------------------------------------------------------------
    def workload_id(self, mod, *, commit: bool = False) -> int | None:
        """The store id of ``mod``'s workload; with ``commit``, added when missing (else ``None``)."""
        shash = module_hash(mod)
        known = self._known.setdefault(shash, [])
        for workload, stored in known:
            if structural_equal(stored, mod):
                return workload
        if commit:
            text = tvm.ir.save_json(mod)
            workload = self.store.commit_workload(shash, text, lambda other: structural_equal(
                tvm.ir.load_json(other), mod))
        else:
            workload = next((w for w, text in self.store.get_workloads(shash)
                             if structural_equal(tvm.ir.load_json(text), mod)), None)
            if workload is None:
                return None
        known.append((workload, mod))
        return workload

    def workload(self, workload: int) -> ms.database.Workload:
        """The MetaSchedule workload with store id ``workload`` (one object per id)."""
        if workload not in self._workloads:
            shash, text = self.store.get_workload(workload)
            mod = tvm.ir.load_json(text)
            self._known.setdefault(shash, []).append((workload, mod))
            self._workloads[workload] = ms.database.Workload(mod)
        return self._workloads[workload]

    def record(self, trial: StoredTrial) -> ms.database.TuningRecord:
        """A stored trial as a MetaSchedule tuning record.

        Structural equality ignores block names, so two models may share a workload whose blocks they name
        differently (one imported from ONNX, one from torch), and a trace names the blocks of the module it
        was made on: the record is replayed on this database's module of the workload, else on the stored
        one, else on each module of the workload it has seen. :class:`~tvm.s_tir.schedule.ScheduleError`
        when none fits.
        """
        from tvm.s_tir.schedule import ScheduleError

        def workloads():
            yield self.workload(trial.workload)
            yield ms.database.Workload(tvm.ir.load_json(self.store.get_workload(trial.workload)[1]))
            for known in self._known.values():
                yield from (ms.database.Workload(m) for w, m in known if w == trial.workload)

        for workload in workloads():
            try:
                return ms.database.TuningRecord.from_json(json.loads(trial.record), workload)
            except ScheduleError:
                continue
        raise ScheduleError("a stored record fits no module of its workload")

    def copy_into(self, database, trials) -> int:
        """Commit the stored ``trials`` that measured a latency (no error, a finite mean) into another
        MetaSchedule ``database`` (a memory or JSON database), each on the module its record replays on
        (:meth:`record`); returns how many. Failed candidates carry no schedule worth applying."""
        count = 0
        for trial in trials:
            if trial.error is not None or not math.isfinite(trial.latency):
                continue
            record = self.record(trial)
            database.commit_tuning_record(ms.database.TuningRecord(
                record.trace, database.commit_workload(record.workload.mod), record.run_secs, record.target,
                record.args_info))
            count += 1
        return count

    # -- MetaSchedule's interface ----------------------------------------------------------------------
    def has_workload(self, mod) -> bool:
        return self.workload_id(mod) is not None

    def commit_workload(self, mod) -> ms.database.Workload:
        workload = self.workload_id(mod, commit=True)
        if workload not in self._workloads:
            self._workloads[workload] = ms.database.Workload(mod)
        return self._workloads[workload]

    def commit_tuning_record(self, record) -> None:
        if self.run is None:
            raise InputError("this database has no run to add records to; it is read-only")
        run_secs = tuple(float(s) for s in record.run_secs) if record.run_secs is not None else ()
        self.store.add_trials(self.run, [StoredTrial(
            workload=self.workload_id(record.workload.mod, commit=True), record=record_json(record), run_secs=run_secs,
            target=target_key(record.target), timestamp=time.time())])

    def get_top_k(self, workload, top_k: int) -> list:
        if top_k < 0:
            raise ValueError("top_k must be non-negative")
        workload_id = self.workload_id(workload.mod)
        if workload_id is None or top_k == 0:
            return []
        records = []
        for trial in self.store.top_trials(workload_id, top_k + len(self._rejected), self.target):
            record = _replayed(trial, workload)
            if record is not None and not (self._rejected and record_json(record) in self._rejected):
                records.append(record)
        return records[:top_k]

    def get_all_tuning_records(self) -> list:
        return [self.record(t) for t in self.store.get_trials()]

    def __len__(self) -> int:
        return self.store.count_trials()


def _replayed(trial: StoredTrial, workload) -> ms.database.TuningRecord | None:
    """``trial`` as a tuning record of ``workload``, or ``None`` when its trace names blocks that
    ``workload``'s module calls otherwise (made on a structurally equal module of another model)."""
    from tvm.s_tir.schedule import ScheduleError

    try:
        return ms.database.TuningRecord.from_json(json.loads(trial.record), workload)
    except ScheduleError:
        return None
