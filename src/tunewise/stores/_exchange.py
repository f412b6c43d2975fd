"""Records in and out: MetaSchedule's JSON database (``database_workload.json`` + ``database_tuning_record.json``).

Export writes a run's measured records through MetaSchedule's own ``JSONDatabase``, so stock TVM reads them
(``ms.database.JSONDatabase(work_dir=...)``, ``compile_relax``). Import reads such a folder, tuned anywhere,
into the store as a run of its own (status ``imported``), whose records then seed searches and compilation
like any other; records the store already holds are left out, so importing a folder twice adds nothing.
"""

from __future__ import annotations

import json
import os
import time

from tunewise.delivery.destinations import check_folder
from tunewise.errors import InputError, message_line
from tunewise.stores._base import IMPORTED, Store, StoredTrial
from tunewise.stores._database import StoreDatabase, record_json, target_key

WORKLOADS, RECORDS = "database_workload.json", "database_tuning_record.json"


def export_records(store: Store, run: int, directory: str) -> int:
    """Write the measured records of ``run`` to a new MetaSchedule JSON database in ``directory``; returns how
    many (failed candidates are left out: they carry no schedule worth applying)."""
    from tvm.s_tir import meta_schedule as ms

    store.get_run(run)  # an unknown run is an error, not an empty export
    check_folder(directory, "records folder")
    if any(os.path.exists(os.path.join(directory, name)) for name in (WORKLOADS, RECORDS)):
        raise InputError(f"{directory} already holds a MetaSchedule database; export into a new folder")
    os.makedirs(directory, exist_ok=True)
    return StoreDatabase(store).copy_into(ms.database.JSONDatabase(work_dir=directory), store.get_trials(run))


def _identity(workload: int, target: str | None, record: str, run_secs: tuple[float, ...]) -> tuple:
    """What makes two records the same measurement: workload, target, trace (the record JSON's first item) and
    the measured seconds.

    The trace is compared as JSON values with its booleans as the integers they equal: MetaSchedule's JSON
    format does not keep the two apart (its database writes a boolean annotation as an integer and a boolean
    attribute as ``true`` or ``false``), and a store may hold traces that write them either way."""
    return workload, target, _values(json.loads(record)[0]), tuple(run_secs)


def _values(value):
    """A JSON value as a hashable one, booleans as integers."""
    if isinstance(value, list):
        return tuple(_values(x) for x in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _values(v)) for k, v in value.items()))
    return int(value) if isinstance(value, bool) else value


def import_records(store: Store, directory: str) -> tuple[int | None, int]:
    """Add the records of the MetaSchedule JSON database in ``directory`` that ``store`` does not hold yet (same
    workload, target, trace and measured seconds) as a new run; returns ``(run id, number of records added)``,
    the run id ``None`` when every record was already there (no run is made). A schedule the store holds with
    other measurements is added with these too, so that its best measurement counts, as in a union of both
    databases. A folder without records is an :class:`InputError`."""
    from tvm.s_tir import meta_schedule as ms

    if not all(os.path.isfile(os.path.join(directory, name)) for name in (WORKLOADS, RECORDS)):
        raise InputError(f"{directory} is not a MetaSchedule JSON database (expected {WORKLOADS} and {RECORDS})")
    try:
        records = ms.database.JSONDatabase(work_dir=directory, allow_missing=False).get_all_tuning_records()
    except Exception as err:  # TVM raises its own error types on a corrupt file
        raise InputError(f"cannot read the records in {directory}: {message_line(err)}") from None
    if not records:
        raise InputError(f"{directory} holds no tuning records ({RECORDS} is empty)")
    database, now = StoreDatabase(store), time.time()
    workloads = [database.workload_id(r.workload.mod, commit=True) for r in records]
    wanted = set(workloads)
    seen = {_identity(t.workload, t.target, t.record, t.run_secs) for t in store.get_trials() if t.workload in wanted}
    new = []
    for record, workload in zip(records, workloads, strict=True):
        text, target = record_json(record), target_key(record.target)
        run_secs = tuple(float(s) for s in record.run_secs) if record.run_secs is not None else ()
        identity = _identity(workload, target, text, run_secs)
        if identity not in seen:
            seen.add(identity)
            new.append(StoredTrial(workload=workload, record=text, run_secs=run_secs, target=target, timestamp=now))
    if not new:
        return None, 0
    targets = sorted({t.target or "" for t in new})
    run = store.create_run(os.path.abspath(directory), targets[0] if len(targets) == 1 else json.dumps(targets),
                           "import", {"source": os.path.abspath(directory)}, status=IMPORTED)
    store.add_trials(run, new)
    return run, len(new)
