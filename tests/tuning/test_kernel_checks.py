"""A tuned record that TVM compiles into wrong code: found by its kernel alone, and passed over for the next."""

import json
import os

import numpy as np
import pytest

from tunewise.delivery import compile as compiler
from tunewise.tuning import kernel_checks

pytestmark = pytest.mark.tvm

RECORDS = os.path.join(os.path.dirname(__file__), "..", "data", "conv1d_transpose_records.json")


@pytest.fixture(scope="module")
def transposed(host_target):
    """The model the records of ``data/conv1d_transpose_records.json`` were made for, its default latencies
    left unmeasured (every record beats them), and its transposed convolution's index."""
    import torch

    from tunewise.importing import frontend
    from tunewise.lowering import tasks

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.ConvTranspose1d(32, 16, 4, stride=4), torch.nn.ReLU()).eval()
    model = tasks.extract(frontend.from_torch(net, (torch.randn(1, 32, 256),)), host_target)
    return model, next(k for k, t in enumerate(model.tasks) if "conv1d_transpose" in t.name)


def _database(model, k, **latencies):
    """A memory database holding the named records of the data file for task ``k``, with those latencies."""
    from tvm.s_tir import meta_schedule as ms

    with open(RECORDS) as f:
        texts = json.load(f)
    database = ms.database.MemoryDatabase()
    workload = database.commit_workload(model.task_mods[k])
    for name, seconds in latencies.items():
        record = ms.database.TuningRecord.from_json(json.loads(texts[name]), workload)
        database.commit_tuning_record(ms.database.TuningRecord(record.trace, workload, [seconds], model.target,
                                                               record.args_info))
    return database


def test_a_kernel_is_checked_against_its_untuned_schedule(transposed):
    model, k = transposed
    (wrong,), (right,) = (compiler.faster_records(model, _database(model, k, **{name: 1e-4}))[k]
                          for name in ("wrong", "right"))
    assert not kernel_checks.matches_untuned(model, k, wrong)
    assert kernel_checks.matches_untuned(model, k, right)


def test_a_record_computing_otherwise_is_passed_over_for_the_next_fastest(transposed, logged):
    model, k = transposed
    name, warnings_logged = model.tasks[k].name, logged("tunewise.tuning.kernel_checks")
    with pytest.raises(Exception, match="differs from the reference"):  # the fastest applied as it is
        compiler.verify(compiler.CompiledModel(compiler.build(model, _database(model, k, wrong=1e-5)), model.target),
                        model.inputs, model.reference_outputs)
    for latencies, used in (({"wrong": 1e-5, "right": 2e-5}, "the next fastest"),
                            ({"wrong": 1e-5}, "its untuned schedule")):
        warnings_logged.clear()
        compiled, error = compiler.compile_checked(model, _database(model, k, **latencies))
        assert error < 1e-4
        np.testing.assert_allclose(compiled(*model.inputs)[0], model.reference_outputs[0], rtol=1e-4, atol=1e-5)
        assert warnings_logged == [
            f"task {name}: its fastest schedule computed otherwise than its untuned one (TVM compiled it wrongly); "
            f"{used} is used"]


def test_a_stores_database_leaves_a_record_found_wrong_out_from_then_on(transposed):
    from tvm.s_tir import meta_schedule as ms

    from tunewise import stores

    model, k = transposed
    store = stores.create("sqlite://")
    database = stores.StoreDatabase(store, run=store.create_run("transposed", "cpu", "test", {}),
                                    target=model.target)
    workload = database.commit_workload(model.task_mods[k])
    for record in _database(model, k, wrong=1e-5, right=2e-5).get_all_tuning_records():
        database.commit_tuning_record(ms.database.TuningRecord(record.trace, workload, record.run_secs, model.target,
                                                               record.args_info))

    def fastest_applied_as_it_is(db) -> bool:
        compiled = compiler.CompiledModel(compiler.build(model, db), model.target)
        return kernel_checks.close(compiled(*model.inputs)[0], model.reference_outputs[0])

    assert not fastest_applied_as_it_is(database)
    compiler.compile_checked(model, database)  # finds the wrong record, and tells the database
    assert fastest_applied_as_it_is(database)  # a later check compiles right at once
    assert [compiler.record_latency(r) for r in database.get_top_k(workload, 5)] == [2e-5]
    assert not fastest_applied_as_it_is(stores.StoreDatabase(store, target=model.target))  # the store keeps it
