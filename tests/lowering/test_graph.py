"""Graph levels on real TVM: every level compiles tiny-cnn to the reference outputs, ``nhwc`` really moves
the convolutions to channels-last, and ``prepack`` folds the tuned weight layouts into the constants."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from tunewise import zoo
from tunewise.delivery import compile as compiler
from tunewise.errors import InputError, UnsupportedOperatorError
from tunewise.importing import frontend
from tunewise.lowering import graph, tasks
from tunewise.tuning import search

pytestmark = pytest.mark.tvm


@pytest.fixture(scope="module")
def tiny_cnn():
    return frontend.load("tiny-cnn")


def _conv_shapes(model, argument: int):
    """The shape of argument ``argument`` (0: data, 1: weights) of every convolution task."""
    return [tuple(int(d) for d in tasks.args_info(mod)[argument].shape)
            for t, mod in zip(model.tasks, model.task_mods, strict=True) if "conv2d" in t.name]


@pytest.mark.parametrize("level", graph.LEVELS)
def test_every_level_compiles_to_the_reference_outputs(tiny_cnn, host_target, level):
    model = tasks.extract(tiny_cnn, host_target, level=level)
    compiled = compiler.CompiledModel(compiler.build(model), host_target)
    assert compiler.verify(compiled, model.inputs, model.reference_outputs) < 1e-4


def test_nhwc_puts_channels_innermost_and_fold_bn_keeps_them_outer(tiny_cnn, host_target):
    # tiny-cnn: 3 -> 16 channels on 16x16 (3x3 kernels), then 16 -> 32 with stride 2
    folded = tasks.extract(tiny_cnn, host_target, level="fold-bn")
    channels_last = tasks.extract(tiny_cnn, host_target, level="nhwc")
    nchw, oihw = _conv_shapes(folded, 0), _conv_shapes(folded, 1)
    nhwc, hwio = _conv_shapes(channels_last, 0), _conv_shapes(channels_last, 1)
    assert sorted(s[1] for s in nchw) == [3, 16]
    assert sorted(s[-1] for s in nhwc) == [3, 16]
    assert all(s[1] == s[2] for s in nhwc)  # square spatial dims now in the middle
    assert sorted(s[0] for s in oihw) == [16, 32]
    assert sorted(s[-1] for s in hwio) == [16, 32]  # output channels innermost in the weights too


def test_fold_bn_removes_the_batch_norm_tasks(tiny_cnn, host_target):
    decomposed = tasks.extract(tiny_cnn, host_target, level="decompose")
    folded = tasks.extract(tiny_cnn, host_target, level="fold-bn")
    assert sum(t.weight for t in folded.tasks) < sum(t.weight for t in decomposed.tasks)


def test_prepack_tunes_weight_layouts_and_folds_them_into_the_constants(tiny_cnn, host_target, measurer):
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms
    from tvm_ffi import structural_equal

    from tunewise import schedulers, stores
    from tunewise.tuning import session

    model = tasks.extract(tiny_cnn, host_target, level="prepack", measurer=measurer)
    convolutions = [k for k, t in enumerate(model.tasks) if "conv2d" in t.name]
    assert convolutions and all("layout_free_buffers" in model.task_mods[k].script() for k in convolutions)
    store = stores.create("sqlite://")
    run = store.create_run(model.name, str(host_target), "flops", {})
    # a slot a task, heaviest first: the convolutions (the other tasks have no weights to lay out)
    loop = session.Session(model, schedulers.create("flops"), session.Budget(max_trials=6 * len(convolutions)),
                           measurer, store, run, session.SessionParts(trials_per_slot=6, warm_start=False))
    loop.run()
    assert sorted(c.task for c in store.get_checkpoints(run)) == convolutions
    # per convolution, its fastest measured schedule that reads the weights in a layout of its own (whether that
    # one or a schedule keeping the layout wins depends on the candidates drawn)
    rewriting = ms.database.MemoryDatabase()
    for k in convolutions:
        workload = loop.database.commit_workload(model.task_mods[k])
        records = loop.database.get_top_k(workload, len(loop.database))
        fastest = next((r for r in records if "layout_rewrite_preproc" in r.as_measure_candidate().sch.mod.script()),
                       None)
        if fastest is not None:
            rewriting.commit_tuning_record(ms.database.TuningRecord(
                fastest.trace, rewriting.commit_workload(model.task_mods[k]), fastest.run_secs, fastest.target,
                fastest.args_info))
    assert len(rewriting) > 0  # tuning a convolution searches its weight layout
    # such a schedule transferred to the task (as schedule sharing does) measures: the runner is given the
    # weight in its packed shape
    k, record = next((k, r) for k in convolutions for r in rewriting.get_all_tuning_records()
                     if structural_equal(r.workload.mod, model.task_mods[k]))
    transfer = search.TaskSearch(model.task_mods[k], model.tasks[k].name, host_target, 0, 1, 4)
    [(candidate, _)] = transfer.adopt([record.as_measure_candidate().sch], loop.database,
                                      ms.cost_model.RandomModel(), 4)
    [measured] = measurer.measure([(candidate.sch.mod, candidate.args_info)])
    assert measured.error is None, measured.message
    # compiled, the rewrites run once, on the constants: no operator the model calls rewrites a layout
    with host_target, rewriting, tvm.transform.PassContext(opt_level=3):
        lowered = relax.transform.MetaScheduleApplyDatabase()(graph.lower(model.mod, host_target, "prepack"))
        folded = tvm.transform.Sequential([relax.transform.SplitLayoutRewritePreproc(), relax.transform.FoldConstant(),
                                           relax.transform.DeadCodeElimination()])(lowered)
    assert any("layout_rewrite_preproc" in f.script() for f in lowered.functions.values()
               if isinstance(f, tvm.tirx.PrimFunc))
    assert not any("layout_rewrite_preproc" in f.script() for f in folded.functions.values()
                   if isinstance(f, tvm.tirx.PrimFunc))
    # every rewriting record applied (none is dropped for not beating an untuned default), the model still verifies
    applied = model.with_default_latencies([math.inf] * len(model.tasks))
    compiled = compiler.CompiledModel(compiler.build(applied, rewriting), host_target)
    assert compiler.verify(compiled, model.inputs, model.reference_outputs) < 1e-4


def test_unknown_level_is_an_input_error(tiny_cnn, host_target):
    with pytest.raises(InputError, match="unknown graph level 'max'"):
        tasks.extract(tiny_cnn, host_target, level="max")


def test_heaviest_keeps_the_largest_weighted_default_latencies_in_order(tiny_mlp):
    _, heavy = sorted(range(2), key=lambda k: tiny_mlp.tasks[k].weight * tiny_mlp.tasks[k].default_latency)
    reduced = tiny_mlp.heaviest(1)
    assert reduced.tasks == (tiny_mlp.tasks[heavy],)
    assert reduced.task_mods == (tiny_mlp.task_mods[heavy],)
    assert tiny_mlp.heaviest(5).tasks == tiny_mlp.tasks


class _Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


class _Concat(torch.nn.Module):
    """Two convolution branches joined by ``torch.cat``, then a convolution over the joined channels."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(3, 4, 1)
        self.c = torch.nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        return self.c(torch.cat([torch.relu(self.a(x)), self.b(x)], dim=1)).mean((2, 3))


class _NegativeAxes(torch.nn.Module):
    """A convolution followed by the operators whose negative axes Relax's ConvertLayout cannot remap."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        y = self.conv(x)  # (1, 4, 1, 8)
        return y.squeeze(-2).max(-1)[0] + y.permute(0, -1, -2, -3).sum((-1, -2)).max(-1)[0]


@pytest.fixture
def fallbacks(logged):
    """The messages logged on ``tunewise.lowering.graph`` during the test (a step that fell back)."""
    return logged("tunewise.lowering.graph")


def _model_file(model, inputs, path: str) -> str:
    """``model`` saved as ``path``: ``.pt2`` by torch.export.save, ``.onnx`` by torch.onnx.export with its
    weights as external data next to it."""
    model = model.eval()
    if path.endswith(".pt2"):
        torch.export.save(torch.export.export(model, inputs), path)
        return path
    import onnx

    torch.onnx.export(model, inputs, path, dynamo=False)  # the dynamo exporter needs onnxscript
    onnx.save_model(onnx.load(path), path, save_as_external_data=True, location="weights.bin", size_threshold=0)
    return path


def _attention_models():
    torch.manual_seed(0)
    return {"multihead-attention": (_Attention(), (torch.randn(1, 8, 16),)),
            "tiny-gpt": zoo.get("tiny-gpt"), "concat-cnn": (_Concat(), (torch.randn(1, 3, 8, 8),))}


@pytest.mark.parametrize("suffix", [".pt2", ".onnx"])
@pytest.mark.parametrize("name", ["multihead-attention", "tiny-gpt", "concat-cnn"])
def test_default_level_compiles_attention_and_concat_models_from_files(host_target, tmp_path, fallbacks, name,
                                                                      suffix):
    model, inputs = _attention_models()[name]
    imported = frontend.load(_model_file(model, inputs, str(tmp_path / f"model{suffix}")))
    extracted = tasks.extract(imported, host_target)
    compiled = compiler.CompiledModel(compiler.build(extracted), host_target)
    assert compiler.verify(compiled, extracted.inputs, extracted.reference_outputs) < 1e-4
    assert fallbacks == []
    if name == "concat-cnn":  # the convolutions did move to channels-last
        assert all(s[-1] in (3, 8) for s in _conv_shapes(extracted, 0))


def test_negative_axes_do_not_stop_the_layout_step(host_target, fallbacks):
    imported = frontend.load(_NegativeAxes(), example_inputs=(torch.randn(1, 3, 1, 8),))
    extracted = tasks.extract(imported, host_target)
    assert _conv_shapes(extracted, 0) == [(1, 1, 8, 3)]  # NHWC
    compiled = compiler.CompiledModel(compiler.build(extracted), host_target)
    assert compiler.verify(compiled, extracted.inputs, extracted.reference_outputs) < 1e-4
    assert fallbacks == []


def test_a_model_with_an_external_call_compiles_with_prepacked_weights(host_target, fallbacks):
    """``max`` over an axis imports as ``topk``, an external call without a compute block, which Relax's
    split of the weight layout rewrites stops on."""
    imported = frontend.load(_NegativeAxes(), example_inputs=(torch.randn(1, 3, 1, 8),))
    extracted = tasks.extract(imported, host_target, level="prepack")
    assert any("topk" in name for name in (gv.name_hint for gv in graph.lower(extracted.mod, host_target, "prepack")
                                           .get_global_vars()))
    compiled = compiler.CompiledModel(compiler.build(extracted), host_target)
    assert compiler.verify(compiled, extracted.inputs, extracted.reference_outputs) < 1e-4
    assert fallbacks == []


def test_a_failing_step_leaves_the_function_as_it_was_and_says_so(host_target, fallbacks):
    from tvm import relax

    class Squeeze(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.conv2d(x, torch.ones(4, 3, 1, 1)).squeeze(-2)

    mod = frontend.load(Squeeze(), example_inputs=(torch.randn(1, 3, 1, 8),)).mod
    layout = relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "HWIO"]})  # fails on squeeze(-2)
    with host_target:
        kept = graph._apply_step(mod, "nhwc", graph.LAYOUT_STEP, [layout])
    assert kept["main"].same_as(mod["main"])
    assert len(fallbacks) == 1 and "channels-last layout step failed on function main" in fallbacks[0]


def test_transposed_convolutions_and_resizes_are_tasks_at_the_default_level(host_target, fallbacks,
                                                                           transposed_model):
    path, operators = transposed_model
    extracted = tasks.extract(frontend.load(path), host_target)
    names = [t.name for t in extracted.tasks]
    for operator in operators:  # each a task of its own, not a high-level operator left for the VM
        assert any(operator in n for n in names), (operator, names)
    assert any(s[-1] == 3 for s in _conv_shapes(extracted, 0))  # the 2-d convolutions did move to channels-last
    compiled = compiler.CompiledModel(compiler.build(extracted), host_target)
    assert compiler.verify(compiled, extracted.inputs, extracted.reference_outputs) < 1e-4
    assert fallbacks == []


def test_a_step_whose_result_cannot_compile_falls_back_for_that_function(host_target, fallbacks, transposed_model,
                                                                         monkeypatch):
    path, operators = transposed_model
    imported = frontend.load(path)
    folded = tasks.extract(imported, host_target, level="fold-bn")
    # without a layout of their own, the transposed convolutions take their input's channels-last layout,
    # which no TOPI lowering takes: the layout step is undone for the function, as at the level below
    monkeypatch.setattr(graph, "LAYOUTS", {"relax.nn.conv2d": ["NHWC", "HWIO"]})
    extracted = tasks.extract(imported, host_target)
    assert len(fallbacks) == 1, fallbacks
    assert ("channels-last layout step, function main cannot compile" in fallbacks[0]
            and f"relax.nn.{operators[0]}" in fallbacks[0]), fallbacks
    assert sorted(_conv_shapes(extracted, 0)) == sorted(_conv_shapes(folded, 0))  # NCHW, as at fold-bn
    names = [t.name for t in extracted.tasks]
    assert all(any(operator in n for n in names) for operator in operators), names
    compiled = compiler.CompiledModel(compiler.build(extracted), host_target)
    assert compiler.verify(compiled, extracted.inputs, extracted.reference_outputs) < 1e-4


@pytest.mark.parametrize("level", graph.LEVELS)
def test_an_operator_no_level_compiles_is_one_line_naming_it(host_target, uncompilable_model, level):
    with pytest.raises(UnsupportedOperatorError) as raised:
        tasks.extract(uncompilable_model, host_target, level=level)
    assert str(raised.value) == ("cannot compile the model at any graph level: TVM cannot lower operator "
                                 "relax.ewise_fma for this target (function main)")


def test_an_operator_whose_lowering_raises_is_named_with_the_reason(host_target):
    from tvm import relax

    builder = relax.BlockBuilder()
    q = relax.Var("q", relax.TensorType((1, 8, 2, 4), "float32"))
    with builder.function("main", [q]):
        with builder.dataflow():
            out = builder.emit_output(relax.op.nn.attention(q, q, q, causal_mask="TopLeft", window_size=4))
        builder.emit_func_output(out)
    imported = frontend.ImportedModel("windowed", builder.get(), (np.zeros((1, 8, 2, 4), np.float32),), ())
    with pytest.raises(UnsupportedOperatorError, match="TVM cannot lower operator relax.nn.attention: "
                                                       "Legalization for sliding-window attention"):
        tasks.extract(imported, host_target)


class _Clipped(torch.nn.Module):
    """Convolutions followed by ReLU6, Hardtanh and a one-sided clamp, which import as ``clip``."""

    def __init__(self):
        super().__init__()
        self.pointwise, self.depthwise = torch.nn.Conv2d(3, 8, 1), torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)

    def forward(self, x):
        y = torch.nn.functional.hardtanh(self.depthwise(torch.nn.functional.relu6(self.pointwise(x))), -0.5, 0.25)
        return torch.cat([y, self.pointwise(x).clamp(min=0.1)], dim=1)  # a clip with one bound


def test_clip_fuses_into_the_convolutions_at_the_default_level_without_transposes(host_target, fallbacks):
    with torch.random.fork_rng():  # fixed weights and inputs, large enough that every bound is reached
        torch.manual_seed(0)
        module, inputs = _Clipped(), (10 * torch.randn(1, 3, 6, 6),)
    extracted = tasks.extract(frontend.load(module, example_inputs=inputs), host_target)
    names = [t.name for t in extracted.tasks]
    # channels-last all the way: no clip left to wrap in transposes, only the model's input and output move
    assert not [n for n in names if "clip" in n] and len([n for n in names if "transpose" in n]) == 2, names
    convolutions = [n for n in names if n.startswith("fused_conv2d")]
    assert len(convolutions) == 3 and all("_maximum" in n for n in convolutions), names
    assert len([n for n in convolutions if "_minimum" in n]) == 2, names
    compiled = compiler.CompiledModel(compiler.build(extracted), host_target)
    assert compiler.verify(compiled, extracted.inputs, extracted.reference_outputs) < 1e-4
    out = compiled(*extracted.inputs)[0]
    clipped, clamped = out[:, :8], out[:, 8:]
    assert clipped.min() >= -0.5 and clipped.max() <= 0.25 and (clipped == 0.25).any() and (clipped == -0.5).any()
    assert clamped.min() == np.float32(0.1) and clamped.max() > 0.25
    assert fallbacks == []


class _Gelu(torch.nn.Module):
    """A linear layer, then GELU beside ``erf`` written out."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 32)

    def forward(self, x):
        y = self.linear(x)
        return torch.nn.functional.gelu(y) + torch.erf(y)


@pytest.mark.parametrize("level", graph.LEVELS)
def test_gelu_and_erf_lose_the_scalar_erf_at_every_level(host_target, level):
    with torch.random.fork_rng():  # fixed weights, inputs spread over erf's curve and its flat tails
        torch.manual_seed(0)
        module, inputs = _Gelu(), (3 * torch.randn(4, 16),)
    extracted = tasks.extract(frontend.load(module, example_inputs=inputs), host_target, level=level)
    scalar_erf = [t.name for t, mod in zip(extracted.tasks, extracted.task_mods, strict=True)
                  if "T.erf(" in mod.script()]
    assert scalar_erf == []
    compiled = compiler.CompiledModel(compiler.build(extracted), host_target)
    assert compiler.verify(compiled, extracted.inputs, extracted.reference_outputs) < 1e-5


class _Winograd(torch.nn.Module):
    """3x3 convolutions that the ``winograd`` level rewrites (stride 1, at least 32 channels, at least 16 output
    tiles: a padded one on a size that is not a multiple of the 4x4 tile, one without padding) and four it leaves
    (stride 2, 16 channels, a 1x1, and one of four output tiles)."""

    def __init__(self):
        super().__init__()
        self.stem, self.same = torch.nn.Conv2d(3, 32, 1), torch.nn.Conv2d(32, 32, 3, padding=1)
        self.valid, self.strided = torch.nn.Conv2d(32, 48, 3), torch.nn.Conv2d(48, 32, 3, stride=2, padding=1)
        self.small, self.narrow = torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.Conv2d(32, 16, 3, padding=1)

    def forward(self, x):  # 15x15, 15x15, 13x13, then 7x7
        y = torch.relu(self.same(torch.relu(self.stem(x))))
        return self.narrow(self.small(self.strided(torch.relu(self.valid(y) + 1.0))))


@pytest.fixture(scope="module")
def winograd_model():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return frontend.load(_Winograd(), example_inputs=(torch.randn(1, 3, 15, 15),))


def test_winograd_level_computes_the_eligible_convolutions_by_winograd(host_target, fallbacks, winograd_model):
    extracted = tasks.extract(winograd_model, host_target, level="winograd")
    names = [t.name for t in extracted.tasks]
    # the two stride-1 convolutions of 32 channels or more, each with its fused bias and activation
    winograd = [n for n in names if "winograd" in n]
    assert len(winograd) == 2 and all(n.startswith("fused_conv2d_winograd") and "relu" in n for n in winograd), names
    assert len([n for n in names if n.startswith("fused_conv2d") and "winograd" not in n]) == 4, names
    # the transformed weights are constants: no task computes them at run time
    assert not [n for n in names if "winograd_weight" in n], names
    compiled = compiler.CompiledModel(compiler.build(extracted), host_target)
    assert compiler.verify(compiled, extracted.inputs, extracted.reference_outputs) < 1e-4
    assert fallbacks == []


def test_a_cpu_model_takes_winograd_convolutions_unless_asked_otherwise(host_target, winograd_model):
    names = [t.name for t in tasks.extract(winograd_model, host_target).tasks]
    assert len([n for n in names if n.startswith("fused_conv2d_winograd")]) == 2, names


def test_winograd_level_is_for_cpus(winograd_model):
    import tvm

    with pytest.raises(InputError, match="'winograd' is for CPU targets"):
        tasks.extract(winograd_model, tvm.target.Target({"kind": "cuda", "arch": "sm_90"}), level="winograd")


def test_winograd_convolution_tunes_with_prepacked_weights(host_target, measurer, winograd_model):
    from tvm.s_tir import meta_schedule as ms

    from tunewise import schedulers, stores
    from tunewise.tuning import session

    model = tasks.extract(winograd_model, host_target, level="winograd", measurer=measurer)
    task = next(k for k, t in enumerate(model.tasks) if "winograd" in t.name)
    alone = dataclasses.replace(model, tasks=(model.tasks[task],), task_mods=(model.task_mods[task],))
    store = stores.create("sqlite://")
    run = store.create_run(model.name, str(host_target), "sequential", {})
    loop = session.Session(alone, schedulers.create("sequential"), session.Budget(max_trials=2), measurer, store,
                           run, session.SessionParts(trials_per_slot=2, warm_start=False))
    loop.run()
    workload = loop.database.commit_workload(model.task_mods[task])
    [best] = loop.database.get_top_k(workload, 1)
    schedule = best.as_measure_candidate().sch.mod.script()
    assert "bgemm" in schedule and "data_pack" in schedule
    # the transforms took their rule: each rows' block computed inside its columns' loops
    assert str(best.trace).count("compute_at") >= 2
    # compiled with that record, the model verifies with the transformed weight rewritten at compile time
    records = ms.database.MemoryDatabase()
    records.commit_tuning_record(ms.database.TuningRecord(best.trace, records.commit_workload(model.task_mods[task]),
                                                          best.run_secs, best.target, best.args_info))
    applied = model.with_default_latencies([math.inf] * len(model.tasks))
    compiled = compiler.CompiledModel(compiler.build(applied, records), host_target)
    assert compiler.verify(compiled, model.inputs, model.reference_outputs) < 1e-4
