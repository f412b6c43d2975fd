"""Records out to MetaSchedule's JSON database and back into a fresh store: the same schedules are applied."""

import json

import pytest

from tunewise import stores
from tunewise.errors import InputError

pytestmark = pytest.mark.tvm


def test_round_trip_through_metaschedule_json(tuned_store, tiny_mlp, tmp_path):
    from tvm.s_tir import meta_schedule as ms
    from tvm_ffi import structural_equal

    from tunewise import compile as compiler

    store, sessions, _ = tuned_store
    runs = [s.run_id for s in sessions]
    fresh = stores.create(f"sqlite:///{tmp_path}/fresh.db")
    stock, held = [], set()
    for run in runs:
        folder = str(tmp_path / f"run{run}")
        measured = [t for t in store.get_trials(run) if t.run_secs]
        assert stores.export_records(store, run, folder) == len(measured)
        stock.append(ms.database.JSONDatabase(work_dir=folder, allow_missing=False))  # stock TVM reads it
        assert len(stock[-1]) == len(measured)
        imported, count = stores.import_records(fresh, folder)
        measurements = {(t.workload, json.dumps(json.loads(t.record)[0]), tuple(t.run_secs)) for t in measured}
        assert count == len(measurements - held) > 0  # a measurement both runs hold is imported once
        assert fresh.get_run(imported).status == stores.IMPORTED
        held |= measurements
    databases = {"original": stores.StoreDatabase(store), "imported": stores.StoreDatabase(fresh),
                 "stock": ms.database.UnionDatabase(*stock)}
    target = tiny_mlp.target
    for mod in tiny_mlp.task_mods:
        expected = databases["original"].query_schedule(mod, target, "main").mod
        for name, db in databases.items():
            assert structural_equal(db.query_schedule(mod, target, "main").mod, expected), name
    # compile_relax reads the imported store directly
    executable = ms.relax_integration.compile_relax(databases["imported"], tiny_mlp.mod, target, params=None)
    compiled = compiler.CompiledModel(executable, target)
    assert compiler.verify(compiled, tiny_mlp.inputs, tiny_mlp.reference_outputs) < 1e-4


def test_exchange_errors_are_one_line(tuned_store, tmp_path):
    store, (session, _), _ = tuned_store
    runs = [session.run_id]
    with pytest.raises(InputError, match="not a MetaSchedule JSON database"):
        stores.import_records(store, str(tmp_path))
    stores.export_records(store, runs[0], str(tmp_path / "out"))
    with pytest.raises(InputError, match="already holds"):
        stores.export_records(store, runs[0], str(tmp_path / "out"))
    with pytest.raises(InputError, match="no run 99"):
        stores.export_records(store, 99, str(tmp_path / "other"))
    (tmp_path / "bad").mkdir()
    for name in ("database_workload.json", "database_tuning_record.json"):
        (tmp_path / "bad" / name).write_text("not json\n")
    with pytest.raises(InputError, match="cannot read"):
        stores.import_records(store, str(tmp_path / "bad"))


def test_import_adds_only_records_the_store_lacks(tuned_store, tmp_path):
    store, (session, _), _ = tuned_store
    folder = str(tmp_path / "records")
    exported = stores.export_records(store, session.run_id, folder)
    fresh = stores.create(f"sqlite:///{tmp_path}/fresh.db")
    run, count = stores.import_records(fresh, folder)
    distinct = len({(t.workload, t.target, t.record) for t in fresh.get_trials()})
    assert count == len(fresh.get_trials(run)) == distinct and 0 < count <= exported
    assert stores.import_records(fresh, folder) == (None, 0)  # twice: nothing new, no run
    assert [r.id for r in fresh.get_runs()] == [run] and len(fresh.get_trials()) == count
    assert stores.import_records(store, folder) == (None, 0)  # the records it was exported from


def test_a_folder_without_records_is_refused(store, tmp_path):
    for name in ("database_workload.json", "database_tuning_record.json"):
        (tmp_path / name).write_text("")
    with pytest.raises(InputError, match="holds no tuning records"):
        stores.import_records(store, str(tmp_path))
    assert store.get_runs() == []
