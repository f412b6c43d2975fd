"""Precisions: what each needs of the target, the bfloat16 graph step (matrix products of constant weights on AMX
in bfloat16, the rest float32) and what it computes, and the tolerance a compiled model is checked with."""

import numpy as np
import pytest

from tunewise.errors import InputError, TargetError
from tunewise.lowering import graph, precision
from tunewise.tuning import kernel_checks

pytestmark = pytest.mark.tvm

AMX_CPU = {"kind": "llvm", "mcpu": "sapphirerapids", "num-cores": 1}


def _target(config):
    import tvm

    return tvm.target.Target(config)


def test_an_unknown_precision_is_refused():
    with pytest.raises(InputError, match="unknown precision 'int4'; choose one of: float32, bfloat16, float16"):
        precision.check("int4", _target(AMX_CPU))


@pytest.mark.parametrize("config, expected", [
    ({"kind": "llvm", "mcpu": "znver4"}, "lacks amx-tile, amx-bf16 (its CPU: znver4)"),
    ({"kind": "c"}, "target c is not one"),
])
def test_bfloat16_names_what_a_target_lacks(config, expected):
    with pytest.raises(TargetError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        precision.check("bfloat16", _target(config))


def test_bfloat16_is_accepted_on_a_cpu_with_amx_and_float32_anywhere():
    precision.check("bfloat16", _target(AMX_CPU))
    precision.check("float32", _target({"kind": "llvm", "mcpu": "znver3"}))


def test_float32_keeps_the_tolerance_of_every_check_and_bfloat16_is_relative_to_the_output_scale():
    assert kernel_checks.tolerance("float32") == (kernel_checks.RTOL, kernel_checks.ATOL)
    assert kernel_checks.tolerance("bfloat16") == (0.0, precision.BFLOAT16_TOLERANCE)


def _dense_module(rows: int, depth: int, columns: int, seed: int = 0):
    """A Relax module of ``relu(x @ W + b)`` with a constant ``W`` and ``b``, and the constants."""
    import tvm
    from tvm import relax

    rng = np.random.default_rng(seed)
    weight = rng.standard_normal((depth, columns)).astype(np.float32)
    bias = rng.standard_normal(columns).astype(np.float32)
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((rows, depth), "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            product = builder.emit(relax.op.matmul(x, relax.const(tvm.runtime.tensor(weight))))
            out = builder.emit_output(relax.op.nn.relu(relax.op.add(product, relax.const(tvm.runtime.tensor(bias)))))
        builder.emit_func_output(out)
    return builder.get(), weight, bias


def _run_in_bfloat16(mod, *inputs):
    """``mod`` extracted and compiled at precision bfloat16 for this CPU, untuned (plain loops: any x86 CPU runs
    them), run on ``inputs``: its first output, and the optimised module."""
    import tvm

    from tunewise.delivery import compile as compiler
    from tunewise.importing import frontend
    from tunewise.lowering import tasks
    from tunewise.target import host_cpu

    target = tvm.target.Target(host_cpu())
    model = tasks.extract(frontend.ImportedModel("model", mod, inputs, ()), target, precision="bfloat16")
    return compiler.CompiledModel(compiler.build(model), target)(*inputs)[0], model.mod


def _operators_and_dtypes(mod):
    """The Relax operators the module's main calls, and the dtypes of the TIR functions' parameters."""
    import tvm
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    dtypes = set()
    for func in mod.functions.values():
        if isinstance(func, tvm.tirx.PrimFunc):
            dtypes |= {str(arg.dtype) for arg in ArgInfo.from_prim_func(func)}
    return graph._operators(mod["main"]), dtypes


def test_the_bfloat16_step_computes_a_product_of_a_constant_weight_in_bfloat16_and_leaves_float32_alone():
    mod, _, _ = _dense_module(64, 64, 32)
    target = _target(AMX_CPU)
    float32 = graph.optimize(mod, target, "winograd")
    bfloat16 = graph.optimize(mod, target, "winograd", "bfloat16")
    assert "relax.matmul" in graph._operators(float32["main"])
    operators = graph._operators(bfloat16["main"])
    assert "relax.matmul" not in operators and "relax.call_tir" in operators and "relax.astype" in operators
    _, dtypes = _operators_and_dtypes(graph.lower(bfloat16, target, "winograd"))
    assert "bfloat16" in dtypes


@pytest.mark.parametrize("rows, depth, columns", [(64, 96, 64), (1, 40, 24)])
def test_the_bfloat16_model_computes_the_float32_product_of_the_rounded_values(rows, depth, columns):
    """Compiled untuned (plain loops: any x86 CPU runs them), the model equals relu(x @ W + b) with ``x`` and
    ``W`` rounded to bfloat16 and the sums in float32, to float32's rounding of the sums, whole blocks or padded
    (a classifier's single row, a depth and columns that are not multiples of 32)."""
    import ml_dtypes

    mod, weight, bias = _dense_module(rows, depth, columns)
    x = np.random.default_rng(1).standard_normal((rows, depth)).astype(np.float32)
    got, optimized = _run_in_bfloat16(mod, x)
    assert "relax.matmul" not in graph._operators(optimized["main"])
    rounded = (x.astype(ml_dtypes.bfloat16).astype(np.float64) @ weight.astype(ml_dtypes.bfloat16).astype(np.float64))
    want = np.maximum(rounded + bias, 0)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
    exact = np.maximum(x.astype(np.float64) @ weight + bias, 0)
    assert 1e-4 < np.abs(got - exact).max() / np.abs(exact).max() < precision.BFLOAT16_TOLERANCE


def _conv_module(shape, weight, strides, padding):
    """A Relax module of an NHWC convolution by the constant HWIO ``weight``."""
    import tvm
    from tvm import relax

    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            out = builder.emit_output(relax.op.nn.conv2d(x, relax.const(tvm.runtime.tensor(weight)), strides=strides,
                                                         padding=padding, data_layout="NHWC", kernel_layout="HWIO"))
        builder.emit_func_output(out)
    return builder.get()


def _reference_conv(x, weight, strides, padding):
    """The NHWC convolution in float64, by loops over the kernel."""
    kh, kw, _, _ = weight.shape
    top, left, bottom, right = padding
    padded = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    out_h = (padded.shape[1] - kh) // strides[0] + 1
    out_w = (padded.shape[2] - kw) // strides[1] + 1
    out = np.zeros((x.shape[0], out_h, out_w, weight.shape[3]))
    for r in range(kh):
        for s in range(kw):
            window = padded[:, r:r + strides[0] * out_h:strides[0], s:s + strides[1] * out_w:strides[1], :]
            out += window @ weight[r, s].astype(np.float64)
    return out


@pytest.mark.parametrize("shape, kernel, outputs, strides, padding", [
    ((1, 9, 9, 3), 3, 40, (2, 2), (1, 1, 1, 1)),  # a stem: 3 channels, stride 2, rows, depth and columns padded
    ((1, 8, 8, 32), 1, 64, (1, 1), (0, 0, 0, 0)),  # a pointwise convolution: whole blocks
])
def test_a_convolution_in_bfloat16_computes_the_product_of_the_rounded_input_patches(shape, kernel, outputs,
                                                                                    strides, padding):
    import ml_dtypes

    rng = np.random.default_rng(2)
    weight = rng.standard_normal((kernel, kernel, shape[3], outputs)).astype(np.float32)
    x = rng.standard_normal(shape).astype(np.float32)
    got, optimized = _run_in_bfloat16(_conv_module(shape, weight, strides, padding), x)
    assert "relax.nn.conv2d" not in graph._operators(optimized["main"])
    rounded = lambda a: a.astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    want = _reference_conv(rounded(x), rounded(weight), strides, padding)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_a_batch_of_products_of_two_activations_computes_in_bfloat16_in_whole_blocks_only():
    """Attention's products: both operands activations, cast at run time (the right one into panels)."""
    import ml_dtypes
    import tvm
    from tvm import relax

    from tunewise.target import host_cpu

    def module(left, right):
        builder = relax.BlockBuilder()
        a, b = relax.Var("a", relax.TensorType(left, "float32")), relax.Var("b", relax.TensorType(right, "float32"))
        with builder.function("main", [a, b]):
            with builder.dataflow():
                out = builder.emit_output(relax.op.matmul(a, b))
            builder.emit_func_output(out)
        return builder.get()

    target = tvm.target.Target(host_cpu())
    assert "relax.matmul" in graph._operators(graph.optimize(module((2, 48, 64), (2, 64, 32)), target, "winograd",
                                                             "bfloat16")["main"])
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 64, 64)).astype(np.float32), rng.standard_normal((2, 64, 32)).astype(np.float32)
    got, optimized = _run_in_bfloat16(module((2, 64, 64), (2, 64, 32)), a, b)
    assert "relax.matmul" not in graph._operators(optimized["main"])
    rounded = lambda x: x.astype(ml_dtypes.bfloat16).astype(np.float64)  # noqa: E731
    want = rounded(a) @ rounded(b)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_the_bfloat16_step_registers_every_amx_intrinsic_a_stored_record_may_name():
    """A resumed run compiles records its search made in another process: in a fresh process the intrinsics
    are unknown until the step runs, and known, every depth, after it."""
    import subprocess
    import sys

    code = ("from tvm.s_tir import TensorIntrin\n"
            "from tunewise.lowering import amx, precision\n"
            "names = [f'tunewise_amx_bf16_32x32x{d}' for d in range(amx.STEP, amx.MAX_DEPTH + 1, amx.STEP)]\n"
            "def known(name):\n"
            "    try:\n"
            "        TensorIntrin.get(name)\n"
            "        return True\n"
            "    except ValueError:\n"
            "        return False\n"
            "before = [known(n) for n in names]\n"
            "precision.steps('bfloat16')\n"
            "print(any(before), all(known(n) for n in names), len(names))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["False", "True", "12"], proc.stderr[-2000:]
