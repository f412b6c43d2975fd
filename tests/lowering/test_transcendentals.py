"""The transcendentals in vectorisable TIR, built with TVM for this CPU: their values against numpy (special
values included), and the kernels of a model lowered as tunewise lowers it calling no libm function."""

import re

import numpy as np
import pytest
import scipy.special
import torch

from tunewise.importing import frontend
from tunewise.lowering import graph, tasks, transcendentals

pytestmark = pytest.mark.tvm

SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-40, 2.0 ** -126, 1e-20, -1e-20, 1.0, -1.0,
            88.72283, 88.72284, 100.0, -87.33654, -103.2, -103.98, -200.0, 3.4028235e38, -3.4028235e38]
TRUTH = {"exp": np.exp, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh, "log": np.log,
         "erf": scipy.special.erf}
MAX_ULPS = {"exp": 1, "log": 1, "erf": 7}
# sigmoid and tanh: their largest absolute error, and in ulps where their result is relative to their argument
MAX_ABS = {"sigmoid": 2.5e-7, "tanh": 5e-7}
MAX_ULPS_WHERE = {"sigmoid": (4, lambda x: x >= 0), "tanh": (4, lambda x: np.abs(x) < 0.5)}
# a scalar call of libm (or of an LLVM intrinsic that becomes one) in assembly or LLVM IR
LIBM_CALL = re.compile(r"\b(?:call\w*\s+|call [^@\n]*@)(?:llvm\.)?"
                       r"(?:exp|exp2|expm1|log|log2|log1p|tanh|sigmoid|pow|erf)(?:f|\.f32|\.v\d+f32)?\b")


def _built(function: str, dtype: str, n: int, target):
    """``B = function(A)`` on ``n`` values of ``dtype``, rewritten by the pass, split by 16 and vectorised."""
    import tvm
    from tvm import s_tir, te, tirx

    a = te.placeholder((n,), dtype, name="A")
    b = te.compute((n,), lambda i: getattr(tirx, function)(a[i]), name="B")
    mod = transcendentals.vectorisable_transcendentals()(tvm.IRModule({"main": te.create_prim_func([a, b])}))
    sch = s_tir.Schedule(mod)
    (loop,) = sch.get_loops(sch.get_sblock("B"))
    sch.vectorize(sch.split(loop, [None, 16])[1])
    return tvm.tirx.build(sch.mod, target=target)


def _run(built, x):
    import tvm

    out = tvm.runtime.tensor(np.zeros_like(x), tvm.cpu())
    built(tvm.runtime.tensor(x, tvm.cpu()), out)
    return out.numpy()


def _inputs(n: int) -> np.ndarray:
    """The special values, then magnitudes spread over every exponent of float32, of both signs."""
    rng = np.random.default_rng(0)
    magnitudes = np.exp2(rng.uniform(-149, 128, n // 2)) * rng.uniform(1, 2, n // 2)
    spread = np.concatenate([magnitudes, -magnitudes, rng.uniform(-110, 110, n // 2)])
    return np.concatenate([np.array(SPECIALS), spread]).astype(np.float32)[:n]


def _ulps(got, truth):
    """Errors in float32 ulps at the float64 truth; inf where a NaN, inf or finite value is of the wrong kind."""
    expected = truth.astype(np.float32)
    same = (got == expected) | (np.isnan(got) & np.isnan(truth))
    ulp = np.exp2(np.maximum(np.floor(np.log2(np.maximum(np.abs(truth), 2.0 ** -149))), -126) - 23)
    finite = np.isfinite(expected) & np.isfinite(got)
    return np.where(same, 0.0, np.where(finite, np.abs(got - truth) / ulp, np.inf))


@pytest.mark.parametrize("function", list(MAX_ULPS))
def test_float32_within_its_ulps_of_the_truth_special_values_included(function, host_target):
    x = _inputs(4096)
    got = _run(_built(function, "float32", len(x), host_target), x)
    with np.errstate(all="ignore"):
        truth = TRUTH[function](x.astype(np.float64))
    errors = _ulps(got, truth)
    assert errors.max() <= MAX_ULPS[function], (function, x[np.argmax(errors)], errors.max())


@pytest.mark.parametrize("function", list(MAX_ABS))
def test_sigmoid_and_tanh_within_their_absolute_error_and_ulps_of_the_truth(function, host_target):
    x = np.concatenate([_inputs(4096), np.linspace(-20, 20, 40001, dtype=np.float32)])
    got = _run(_built(function, "float32", len(x), host_target), x)
    with np.errstate(all="ignore"):
        truth = TRUTH[function](x.astype(np.float64))
    errors = _ulps(got, truth)
    assert np.isfinite(errors).all(), x[~np.isfinite(errors)]  # no NaN, inf or finite value of the wrong kind
    finite = np.isfinite(truth)
    absolute = np.abs(got[finite] - truth[finite])
    assert absolute.max() <= MAX_ABS[function], (function, x[finite][np.argmax(absolute)], absolute.max())
    bound, where = MAX_ULPS_WHERE[function]
    assert errors[where(x)].max() <= bound, (function, errors[where(x)].max())


def test_special_values_exactly():
    import tvm

    target = tvm.target.Target({"kind": "llvm"})  # generic x86-64, without the host's FMA
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, 1e-30, -1e-30, 89.0, -104.0], np.float32)
    exp, sigmoid, tanh, log, erf = (_run(_built(f, "float32", len(x), target), x) for f in TRUTH)
    nan, inf = np.nan, np.inf
    np.testing.assert_array_equal(exp[[0, 1, 2, 3, 4, 6, 7, 8, 9]], [nan, inf, 0, 1, 1, 1, 1, inf, 0])
    np.testing.assert_array_equal(sigmoid[[0, 1, 2, 3, 4, 8, 9]], [nan, 1, 0, 0.5, 0.5, 1, 0])
    np.testing.assert_array_equal(tanh[[0, 1, 2, 3, 4, 8, 9]], [nan, 1, -1, 0, 0, 1, -1])
    np.testing.assert_array_equal(tanh[6:8], x[6:8])
    assert not np.signbit(tanh[3]) and np.signbit(tanh[4])
    np.testing.assert_array_equal(log[[0, 1, 2, 3, 4, 5, 7, 9]], [nan, inf, nan, -inf, -inf, nan, nan, nan])
    np.testing.assert_array_equal(erf[[0, 1, 2, 3, 4, 8, 9]], [nan, 1, -1, 0, 0, 1, -1])
    assert not np.signbit(erf[3]) and np.signbit(erf[4])


def test_float16_through_float32(host_target):
    x = np.linspace(-12, 11, 512).astype(np.float16)
    got = _run(_built("exp", "float16", len(x), host_target), x)
    np.testing.assert_allclose(got.astype(np.float64), np.exp(x.astype(np.float64)), rtol=2.0 ** -10, atol=2.0 ** -24)


class _Activations(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x * torch.sigmoid(x) + torch.tanh(x) + torch.nn.functional.gelu(x), dim=-1).log()


def _vectorised(mod):
    """``mod``'s one function with its innermost spatial loops split by 16 and vectorised (a schedule a search
    on a CPU finds for such kernels), every block but the reductions and the last inlined."""
    from tvm import s_tir

    sch = s_tir.Schedule(mod)
    for block in sch.get_child_blocks(sch.get_sblock("root"))[:-1]:
        try:
            sch.compute_inline(block)
        except s_tir.ScheduleError:
            pass
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        try:
            sch.vectorize(sch.split(sch.get_loops(block)[-1], [None, 16])[1])
        except s_tir.ScheduleError:  # a reduction's innermost loop
            pass
    return sch.mod


def _libm_calls(model, target) -> list[str]:
    import tvm

    found = []
    for mod in model.task_mods:
        built = tvm.tirx.build(_vectorised(mod), target=target)
        for kind in ("asm", "ll"):
            found += LIBM_CALL.findall(built.inspect_source(kind))
    return found


@pytest.mark.parametrize("level", ["none", None])  # the least the graph is rewritten, and the default
def test_the_lowered_kernels_call_no_libm_function(host_target, monkeypatch, level):
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    imported = frontend.load(_Activations(), example_inputs=(x,))
    model = tasks.extract(imported, host_target, level=level)
    assert _libm_calls(model, host_target) == []
    if level is None:  # as TVM lowers them, at the default level: the test can fail
        monkeypatch.setattr(graph, "tir_rewrites", lambda _target: [])
        assert _libm_calls(tasks.extract(imported, host_target, level=level), host_target)


@pytest.mark.parametrize("activation", [torch.nn.SiLU(), torch.nn.Tanh(), torch.nn.GELU()])
def test_every_design_space_fuses_the_activation_into_its_convolution_and_calls_no_libm(host_target, activation):
    import tvm
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    from tunewise.lowering import spaces

    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 1), activation).eval()
    x = torch.randn(1, 8, 14, 14, generator=torch.Generator().manual_seed(0))
    extracted = tasks.extract(frontend.load(model, example_inputs=(x,)), host_target)
    [mod] = [m for m in extracted.task_mods if "conv2d" in m.script()]
    sch = s_tir.Schedule(mod)
    assert len(sch.get_child_blocks(sch.get_sblock("root"))) >= 3  # the convolution, its activation's blocks
    context = ms.TuneContext(mod, target=host_target, space_generator=spaces.generator(mod, host_target),
                             rand_state=0)
    for space in context.generate_design_space():
        # the convolution and one block computing the activation of its tiles as it writes the output
        left = [space.get(b).name_hint for b in space.get_child_blocks(space.get_sblock("root"))]
        assert len([name for name in left if "pad" not in name]) == 2, left
        # a candidate of the search, as it is measured: postprocessed (vectorised, parallel) and built
        assert all(postproc.apply(space) for postproc in context.space_generator.postprocs)
        built = tvm.tirx.build(space.mod, target=host_target)
        assert LIBM_CALL.findall(built.inspect_source("asm")) == []
