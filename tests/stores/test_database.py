"""MetaSchedule's database interface over the store, checked against MetaSchedule's own MemoryDatabase."""

import pytest

from tunewise import stores

pytestmark = pytest.mark.tvm


def commit(db, mod, target, latencies, *, empty=False):
    """Commit one record per latency (``None``: a failed candidate) for workload ``mod``."""
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    from tunewise.lowering.tasks import args_info

    workload = db.commit_workload(mod)
    for latency in latencies:
        sch = s_tir.Schedule(mod)
        if not empty:
            sch.get_sblock("root")
        db.commit_tuning_record(ms.database.TuningRecord(
            sch.trace, workload, None if latency is None else [latency, latency], target, args_info(mod)))


def mean(record):
    return sum(float(s) for s in record.run_secs) / len(record.run_secs)


def other_module():
    from tvm import te

    a = te.placeholder((8,), name="a")
    return __import__("tvm").IRModule({"main": te.create_prim_func([a, te.compute((8,), lambda i: a[i] * 2)])})


def test_behaves_as_metaschedule_memory_database(store, tiny_mlp):
    from tvm.s_tir import meta_schedule as ms

    ours = stores.StoreDatabase(store, run=store.create_run("tiny-mlp", "cpu", "test", {}))
    reference = ms.database.MemoryDatabase()
    target = tiny_mlp.target
    for db in (ours, reference):
        for k, mod in enumerate(tiny_mlp.task_mods):
            commit(db, mod, target, [3e-3 + k, 1e-3 + k, None, 2e-3 + k])
            commit(db, mod, target, [1e-9], empty=True)  # ignored by MetaSchedule: an empty trace
    assert len(ours) == len(reference) == 10
    assert len(ours.get_all_tuning_records()) == len(reference.get_all_tuning_records())
    assert not ours.has_workload(other_module()) and not reference.has_workload(other_module())
    for k, mod in enumerate(tiny_mlp.task_mods):
        assert ours.has_workload(mod) and reference.has_workload(mod)
        for top_k in (0, 1, 2, 10):
            got = [mean(r) for r in ours.get_top_k(ours.commit_workload(mod), top_k)]
            want = [mean(r) for r in reference.get_top_k(reference.commit_workload(mod), top_k)]
            assert got == pytest.approx(want) and len(got) == min(top_k, 3)
        # through MetaSchedule's C++ side, as compile_relax asks
        assert mean(ours.query_tuning_record(mod, target, "main")) == pytest.approx(1e-3 + k)
        assert ours.query_schedule(mod, target, "main") is not None


def test_records_are_shared_across_handles_and_filtered_by_target(store, store_url, tiny_mlp):
    import tvm

    mod, target = tiny_mlp.task_mods[0], tiny_mlp.target
    writer = stores.StoreDatabase(store, run=store.create_run("tiny-mlp", "cpu", "test", {}))
    commit(writer, mod, target, [2e-3])
    commit(writer, mod, tvm.target.Target({"kind": "llvm"}), [1e-3])  # tuned for another machine
    other = stores.create(store_url)
    everything, mine = stores.StoreDatabase(other), stores.StoreDatabase(other, target=target)
    assert [mean(r) for r in everything.get_top_k(everything.commit_workload(mod), 5)] == pytest.approx([1e-3, 2e-3])
    [best] = mine.get_top_k(mine.commit_workload(mod), 5)
    assert mean(best) == pytest.approx(2e-3) and str(best.target) == str(target)
    with pytest.raises(Exception, match="read-only"):  # an InputError, as TVM passes it back
        commit(mine, mod, target, [1e-3])
    other.close()


def test_a_weight_layout_rewrite_record_round_trips(tmp_path, host_target):
    # Tuned with weights marked layout-free (TVM's CPU weight prepacking), a record's trace holds an IndexMap,
    # which MetaSchedule's Python as_json cannot convert: such records come from stock tuning runs too. The
    # store keeps the text MetaSchedule's JSON database writes, and replays it as that database does (which
    # reads the rewrite's boolean annotation back as an integer).
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms
    from tvm_ffi import structural_equal

    from tunewise.lowering.tasks import args_info
    from tunewise.stores._database import record_json

    a, w = te.placeholder((16, 32), name="a"), te.placeholder((32, 32), name="w")
    k = te.reduce_axis((0, 32), name="k")
    dense = te.compute((16, 32), lambda i, j: te.sum(a[i, k] * w[j, k], axis=k), name="dense")
    mod = tvm.IRModule({"main": te.create_prim_func([a, w, dense]).with_attr("layout_free_buffers", [1])})
    context = ms.TuneContext(mod, target=host_target, space_generator="post-order-apply",
                             search_strategy="replay-trace", task_name="dense", num_threads=1).clone()
    context.pre_tuning(8, 8, context.generate_design_space(), ms.database.MemoryDatabase(),
                       ms.cost_model.RandomModel())
    candidate = context.generate_measure_candidates()[0]
    assert "transform_layout" in str(candidate.sch.trace)
    store = stores.create(f"sqlite:///{tmp_path}/t.db")
    db = stores.StoreDatabase(store, run=store.create_run("dense", "cpu", "test", {}))
    db.commit_tuning_record(ms.database.TuningRecord(candidate.sch.trace, db.commit_workload(mod), [1e-3],
                                                     host_target, args_info(mod)))
    [back] = stores.StoreDatabase(store).get_top_k(db.commit_workload(mod), 1)
    (tmp_path / "stock").mkdir()
    stock = ms.database.JSONDatabase(work_dir=str(tmp_path / "stock"))
    stock.commit_tuning_record(ms.database.TuningRecord(candidate.sch.trace, stock.commit_workload(mod), [1e-3],
                                                        host_target, args_info(mod)))
    [expected] = ms.database.JSONDatabase(work_dir=str(tmp_path / "stock")).get_all_tuning_records()
    assert record_json(back) == record_json(expected) == store.get_trials()[0].record
    replayed, stock_replayed = tvm.s_tir.Schedule(mod), tvm.s_tir.Schedule(mod)
    back.trace.apply_to_schedule(replayed, remove_postproc=False)
    expected.trace.apply_to_schedule(stock_replayed, remove_postproc=False)
    assert structural_equal(replayed.mod, stock_replayed.mod)
    assert "layout_rewrite_preproc" in replayed.mod.script()
    store.close()


def test_a_workload_two_models_name_differently_shares_what_fits(tmp_path, host_target):
    # structural equality ignores block names: an ONNX import and a torch import of one operator are one
    # workload, and a trace made on one names blocks the other does not have
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms
    from tvm_ffi import structural_equal

    from tunewise.lowering.tasks import args_info

    def scaled(name):
        a = te.placeholder((64, 64), name="a")
        return tvm.IRModule({"main": te.create_prim_func([a, te.compute((64, 64), lambda i, j: a[i, j] * 2,
                                                                        name=name)])})

    first, second = scaled("double"), scaled("twice")
    assert structural_equal(first, second)
    store = stores.create(f"sqlite:///{tmp_path}/t.db")
    writer = stores.StoreDatabase(store, run=store.create_run("m", "cpu", "test", {}))
    for mod, block, latency in ((first, "double", 1e-3), (second, "twice", 2e-3)):
        sch = tvm.s_tir.Schedule(mod)
        sch.parallel(sch.get_loops(sch.get_sblock(block))[0])
        writer.commit_tuning_record(ms.database.TuningRecord(sch.trace, writer.commit_workload(mod), [latency],
                                                             host_target, args_info(mod)))
    reader = stores.StoreDatabase(store)  # a new process asks with the second model's module first
    [top] = reader.get_top_k(reader.commit_workload(second), 2)
    assert mean(top) == pytest.approx(2e-3)  # the first model's better record does not fit: skipped
    assert sorted(mean(reader.record(t)) for t in store.get_trials()) == pytest.approx([1e-3, 2e-3])
    store.close()
