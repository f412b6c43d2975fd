"""Concatenations written in place on real TVM: fire modules (SqueezeNet's) and a DenseNet-style concatenation
compile without a concatenation kernel to torch's outputs, and tuned records of the rewritten producers apply."""

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from tunewise import schedulers, stores
from tunewise.delivery import compile as compiler
from tunewise.importing import frontend
from tunewise.lowering import concat, graph, tasks
from tunewise.tuning import session
from tunewise.zoo.architectures import _Fire

pytestmark = pytest.mark.tvm


class _Fires(nn.Module):
    """Two fire modules and a 1x1 convolution: two channel concatenations, each of two convolutions (the second
    fire's 3x3 one a Winograd convolution at the default level)."""

    def __init__(self):
        super().__init__()
        self.fires = nn.Sequential(_Fire(8, 4, 16), _Fire(32, 32, 32))
        self.head = nn.Conv2d(64, 8, 1)

    def forward(self, x):
        return self.head(self.fires(x))


class _Dense(nn.Module):
    """A DenseNet-style concatenation: the block's input (used by its convolution too) and the new features."""

    def __init__(self):
        super().__init__()
        self.stem, self.grow, self.head = nn.Conv2d(3, 8, 1), nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(16, 4, 1)

    def forward(self, x):
        a = torch.relu(self.stem(x))
        return self.head(torch.cat([a, torch.relu(self.grow(a))], 1))


@pytest.fixture(scope="module")
def fires():
    torch.manual_seed(0)
    return frontend.from_torch(_Fires(), (torch.randn(1, 8, 16, 16),), name="fires")


def _calls(mod, op: str) -> list:
    """The calls of operator ``op`` in ``mod``'s main function."""
    from tvm import relax

    found = []
    relax.analysis.post_order_visit(mod["main"], lambda e: found.append(e) if isinstance(e, relax.Call)
                                    and getattr(e.op, "name", None) == op else None)
    return found


def _concatenations(mod) -> int:
    """How many times ``mod``'s main function calls a TIR concatenation."""
    return sum(concat.concat_axis(mod[call.args[0]]) is not None for call in _calls(mod, "relax.call_tir"))


def test_write_into_writes_its_slice_and_nothing_else():
    import tvm
    from tvm import te, topi

    x = te.placeholder((2, 3, 4), name="x")
    func = concat.write_into(te.create_prim_func([x, topi.nn.relu(x)]), 10, 4, 2)
    run = tvm.compile(tvm.IRModule({"main": func}), target="llvm").jit()
    data = np.random.default_rng(0).standard_normal((2, 3, 4)).astype("float32")
    whole = np.full((2, 3, 10), 7.0, "float32")
    out = tvm.runtime.tensor(whole)
    run["main"](tvm.runtime.tensor(data), out)
    expected = whole.copy()
    expected[..., 4:8] = np.maximum(data, 0)
    np.testing.assert_array_equal(out.numpy(), expected)


def test_fire_modules_compile_without_concatenation_kernels(fires, host_target, logged):
    fallbacks = logged("tunewise.lowering.graph")
    plain = graph.lower(graph.optimize(fires.mod, host_target, "none"), host_target, "none")
    assert _concatenations(plain) == 2  # what FuseTIR leaves at level none: the copies
    model = tasks.extract(fires, host_target)
    lowered = graph.lower(model.mod, host_target, model.level)
    assert _concatenations(lowered) == 0
    assert len(_calls(lowered, "relax.call_tir_inplace")) == 2  # each fire's second expand writes into the first's
    names = [t.name for t in model.tasks]
    assert sum(n.endswith("_slice") for n in names) == 4  # all four expand convolutions are tasks
    assert any("winograd" in n and n.endswith("_slice") for n in names)
    assert fallbacks == []  # no step fell back for the rewriting
    compiled = compiler.CompiledModel(compiler.build(model), host_target)
    assert compiler.verify(compiled, model.inputs, model.reference_outputs) < 1e-4


def test_an_input_used_elsewhere_is_copied_into_its_slice(host_target):
    torch.manual_seed(0)
    model = tasks.extract(frontend.from_torch(_Dense(), (torch.randn(1, 3, 6, 6),), name="dense"), host_target)
    lowered = graph.lower(model.mod, host_target, model.level)
    assert _concatenations(lowered) == 0
    names = [gv.name_hint for gv in lowered.functions]
    assert sum(n.startswith("copy_slice") for n in names) == 1 and sum(n.endswith("_slice") for n in names) == 2
    compiled = compiler.CompiledModel(compiler.build(model), host_target)
    assert compiler.verify(compiled, model.inputs, model.reference_outputs) < 1e-4


def _best_records(model, keep, measurer, host_target, trials: int) -> tuple:
    """``model`` reduced to its tasks ``keep``, tuned round-robin ``trials`` trials a task, and each task's best
    record (``None`` where it has none)."""
    tuned = dataclasses.replace(model, tasks=tuple(model.tasks[k] for k in keep),
                                task_mods=tuple(model.task_mods[k] for k in keep))
    store = stores.create("sqlite://")
    run = store.create_run(tuned.name, str(host_target), "round-robin", {})
    session.Session(tuned, schedulers.create_seeded("round-robin", 0),
                    session.Budget(max_trials=trials * len(keep), per_task_trials=trials), measurer, store, run,
                    session.SessionParts(trials_per_slot=trials)).run()
    database = stores.StoreDatabase(store, target=host_target)
    tops = [database.get_top_k(database.commit_workload(m), 1) for m in tuned.task_mods]
    return tuned, [top[0] if top else None for top in tops]


def test_tuned_records_of_the_slice_writers_apply(fires, host_target, measurer):
    import tvm
    from tvm import relax

    model = tasks.extract(fires, host_target, measurer=measurer)
    keep = [k for k, t in enumerate(model.tasks) if t.name.endswith("_slice")][:2]
    tuned, best = _best_records(model, keep, measurer, host_target, trials=4)
    assert all(best)
    chosen = compiler.records_database(tuned, best)  # applied whatever their latency
    with host_target, chosen, tvm.transform.PassContext(opt_level=3):
        applied = relax.transform.MetaScheduleApplyDatabase()(graph.lower(model.mod, host_target, model.level))
    scheduled = {gv.name_hint for gv, f in applied.functions.items()
                 if isinstance(f, tvm.tirx.PrimFunc) and f.attrs and f.attrs.get("tirx.is_scheduled", False)}
    assert {t.name for t in tuned.tasks} <= scheduled
    compiled = compiler.CompiledModel(compiler._build(model, chosen), host_target)
    assert compiler.verify(compiled, model.inputs, model.reference_outputs) < 1e-4


def test_the_producers_written_in_place_read_their_weights_pre_packed(fires, host_target, measurer):
    import tvm

    model = tasks.extract(fires, host_target, measurer=measurer)
    lowered = graph.lower(model.mod, host_target, model.level)
    in_place = {call.args[0].name_hint for call in _calls(lowered, "relax.call_tir_inplace")}
    keep = [k for k, t in enumerate(model.tasks) if t.name in in_place]
    assert len(keep) == 2 and any("winograd" in name for name in in_place)  # each fire's second expand
    tuned, best = _best_records(model, keep, measurer, host_target, trials=2)
    assert all(record is not None and "meta_schedule.layout_rewrite_preproc" in str(record.trace) for record in best)
    chosen = compiler.records_database(tuned, best)  # applied whatever their latency
    with host_target, chosen, tvm.transform.PassContext(opt_level=3):
        final = graph.compile_pipeline(host_target, model.level)(model.mod)
    functions = {gv.name_hint: f for gv, f in final.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
    # the weight rewrites are split out and folded into the constants, none left to run at every call
    assert {f"{name}_prepacked" for name in in_place} <= set(functions)
    assert [n for n, f in functions.items() if "meta_schedule.layout_rewrite_preproc" in f.script()] == []
    compiled = compiler.CompiledModel(compiler._build(model, chosen), host_target)
    assert compiler.verify(compiled, model.inputs, model.reference_outputs) < 1e-4
