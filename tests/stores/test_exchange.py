"""Records out to MetaSchedule's JSON database and back into a fresh store: the same schedules are applied."""

import dataclasses
import json

import pytest

from tunewise import stores
from tunewise.errors import InputError

pytestmark = pytest.mark.tvm


def test_round_trip_through_metaschedule_json(tuned_store, tiny_mlp, tmp_path):
    from tvm.s_tir import meta_schedule as ms

    from tunewise.delivery import compile as compiler

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
    _apply_alike(tiny_mlp, store, fresh, ms.database.UnionDatabase(*stock))
    # compile_relax reads the imported store directly
    executable = ms.relax_integration.compile_relax(stores.StoreDatabase(fresh), tiny_mlp.mod, tiny_mlp.target,
                                                    params=None)
    compiled = compiler.CompiledModel(executable, tiny_mlp.target)
    assert compiler.verify(compiled, tiny_mlp.inputs, tiny_mlp.reference_outputs) < 1e-4


def _apply_alike(model, store, imported, stock) -> None:
    """Each task of ``model`` gets the same schedule from ``store``, from the store ``imported`` its records went
    into, and from MetaSchedule's own JSON databases (``stock``)."""
    from tvm_ffi import structural_equal

    databases = {"original": stores.StoreDatabase(store), "imported": stores.StoreDatabase(imported),
                 "stock": stock}
    for mod in model.task_mods:
        expected = databases["original"].query_schedule(mod, model.target, "main").mod
        for name, db in databases.items():
            assert structural_equal(db.query_schedule(mod, model.target, "main").mod, expected), name


@pytest.fixture(scope="module")
def prepacked(host_target, measurer, tmp_path_factory):
    """``(model, store, run)``: tiny-mlp at graph level ``prepack`` (its weights layout-free, so that every
    trace rewrites their layouts: ``TransformLayout`` with an index map) and a SQLite store with a short tuning
    run of it."""
    from tunewise import schedulers
    from tunewise.importing import frontend
    from tunewise.lowering import tasks
    from tunewise.tuning import session

    model = tasks.extract(frontend.load("tiny-mlp"), host_target, level="prepack", measurer=measurer)
    store = stores.create(f"sqlite:///{tmp_path_factory.mktemp('prepacked')}/tunewise.db")
    run = store.create_run(model.name, str(model.target), "round-robin", {})
    session.Session(model, schedulers.create_seeded("round-robin", 0), session.Budget(max_trials=8), measurer,
                    store, run, session.SessionParts(trials_per_slot=4)).run()
    return model, store, run


def test_records_that_rewrite_weight_layouts_come_back_as_they_were_stored(prepacked, tmp_path):
    from tvm.s_tir import meta_schedule as ms

    from tunewise.delivery import compile as compiler

    model, store, run = prepacked
    measured = [t for t in store.get_trials(run) if t.run_secs]
    assert measured and all('"TransformLayout"' in t.record for t in measured)
    folder = str(tmp_path / "records")
    assert stores.export_records(store, run, folder) == len(measured)
    assert stores.import_records(store, folder) == (None, 0)  # the records it was exported from
    fresh = stores.create(f"sqlite:///{tmp_path}/fresh.db")
    imported, count = stores.import_records(fresh, folder)
    assert count == len(measured)
    # MetaSchedule's JSON database gives back the very texts the store holds
    assert sorted(t.record for t in fresh.get_trials(imported)) == sorted(t.record for t in measured)
    assert stores.import_records(fresh, folder) == (None, 0)
    # a store whose texts write the traces' booleans as integers holds the same records
    older = stores.create(f"sqlite:///{tmp_path}/older.db")
    source, copy = stores.StoreDatabase(store), stores.StoreDatabase(older)
    texts = [json.dumps(_booleans_as_integers(json.loads(t.record))) for t in measured]
    assert all(text != t.record for text, t in zip(texts, measured, strict=True))
    older.add_trials(older.create_run(model.name, str(model.target), "round-robin", {}), [
        dataclasses.replace(t, workload=copy.workload_id(source.workload(t.workload).mod, commit=True), record=text,
                            task=None) for text, t in zip(texts, measured, strict=True)])
    assert stores.import_records(older, folder) == (None, 0)
    _apply_alike(model, store, fresh, ms.database.JSONDatabase(work_dir=folder, allow_missing=False))
    # compiled at prepack from the imported records: their weight layout rewrites folded into the constants
    compiled = compiler.CompiledModel(compiler.build(model, stores.StoreDatabase(fresh)), model.target)
    assert compiler.verify(compiled, model.inputs, model.reference_outputs) < 1e-4


def _booleans_as_integers(value):
    if isinstance(value, list):
        return [_booleans_as_integers(x) for x in value]
    return int(value) if isinstance(value, bool) else value


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
