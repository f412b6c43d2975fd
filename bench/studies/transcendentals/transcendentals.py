"""Benchmark: ``exp``, ``sigmoid``, ``tanh``, ``log`` and ``erf`` in vectorisable TIR against libm and TOPI's.

::

    .venv/bin/python bench/studies/transcendentals/transcendentals.py \
        --out bench/results/transcendentals.json

Four parts, one JSON (with :mod:`provenance`):

- ``accuracy``: each function as tunewise computes it (:mod:`tunewise.lowering.transcendentals`), as TVM lowers it
  for LLVM (libm: ``expf``, ``logf``, ``tanhf``, ``erff``), and TOPI's ``fast_exp``/``fast_tanh``/``fast_erf``
  (sigmoid as ``1 / (1 + fast_exp(-x))``), each one kernel built for this CPU, run on every ``--stride``-th float32 bit
  pattern (all signs and exponents, NaNs included) and on special values. The error of a result is in units in
  the last place of the float32 at the true value (float64 numpy, ``2^-149`` in the denormals): its maximum,
  where it is, and how many results are off by more than 1 ulp or wrong in kind (a NaN, an inf or a 0 where
  the other is due); and the largest absolute error, where it is. ``specials`` lists the results at NaN, ±inf,
  ±0, the overflow and underflow edges.
- ``loops``: SiLU, sigmoid, tanh, GELU and the exponent of a softmax on ``--elements`` floats, split by 16 and
  vectorised, one core: median time, libm lowering (``old``) against tunewise's (``new``).
- ``probe``: ``silu(x) + sigmoid(x) / 2`` on a 1x96x112x112 input through tunewise's compilation, untuned and
  after ``--trials`` trials a task (``tunewise.job.workflow.tune``, its timing), with TVM's lowering of the
  transcendentals (``old``) and tunewise's (``new``).
- ``epilogue``: a 1x1 convolution 16 -> 96 with its SiLU at 112x112 (an EfficientNet-B0 layer), extracted as
  tunewise extracts it: how many of the design spaces tunewise searches leave only the convolution and one block
  computing the SiLU as it writes the output (the sigmoid inlined); then SiLU on as many floats against
  ``x / (1 + x^2)`` (as much memory, one division) and a copy (``2 x``), on all cores, vectorised by 16 and 64.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
from unittest import mock

import numpy as np
import scipy.special

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

FUNCTIONS = ("exp", "sigmoid", "tanh", "log", "erf")
TRUTH = {"exp": np.exp, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh, "log": np.log,
         "erf": scipy.special.erf}
SPECIALS = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e-45, -1e-45, 1e-40, 1.17549435e-38, 1.0,
            -1.0, 1e-20, -1e-20, 88.72283, 88.72284, 88.8, -87.33654, -103.2789, -103.97, -104.0, -200.0, 200.0,
            3.4028235e38, -3.4028235e38]


def expression(name: str, variant: str, x):
    """``name`` of the float32 expression ``x`` as ``variant`` computes it (``tunewise``, ``libm``, ``topi``)."""
    from tvm import tirx

    from tunewise.lowering import transcendentals

    if variant == "tunewise":
        return getattr(transcendentals, name)(x)
    if variant == "libm":
        return getattr(tirx, name)(x)
    raise ValueError(variant)


def kernel(name: str, variant: str, n: int, target, *, row: int = 0):
    """A built kernel ``B = name(A)`` on ``n`` float32 (``A - A[row start]`` for ``softmax``'s exponent with
    rows of ``row``), its loop split by 16 and vectorised."""
    import tvm
    from tvm import s_tir, te, topi

    a = te.placeholder((n,), "float32", name="A")
    if variant == "topi":
        inner = {"exp": lambda t: topi.fast_exp(t), "tanh": lambda t: topi.fast_tanh(t), "erf": topi.fast_erf,
                 "sigmoid": lambda t: topi.divide(1.0, topi.add(1.0, topi.fast_exp(topi.negative(t))))}[name]
        b = inner(a)
    elif name == "silu":
        b = te.compute((n,), lambda i: a[i] * expression("sigmoid", variant, a[i]), name="B")
    elif name == "gelu":
        b = te.compute((n,), lambda i: a[i] * (0.5 + 0.5 * expression("erf", variant, a[i] * 0.7071067811865476)),
                       name="B")
    elif name == "softmax-exp":
        b = te.compute((n,), lambda i: expression("exp", variant, a[i] - a[i - i % row]), name="B")
    else:
        b = te.compute((n,), lambda i: expression(name, variant, a[i]), name="B")
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b])}))
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    for block in blocks[:-1]:
        sch.compute_inline(block)
    (loop,) = sch.get_loops(blocks[-1])
    sch.vectorize(sch.split(loop, [None, 16])[1])
    return tvm.tirx.build(sch.mod, target=target)


def library_calls(built) -> list[str]:
    """The functions ``built``'s assembly calls, but TVM's own."""
    calls = set(re.findall(r"call\w*\s+([A-Za-z_][\w.@]*)", built.inspect_source("asm")))
    return sorted(c for c in calls if "TVM" not in c and "tvm" not in c and not c.startswith("main"))


def float_sweep(stride: int, chunk: int):
    """Every ``stride``-th float32 bit pattern, then the special values, in arrays of at most ``chunk``."""
    for start in range(0, 1 << 32, stride * chunk):
        stop = min(start + stride * chunk, 1 << 32)
        yield np.arange(start, stop, stride, dtype=np.uint64).astype(np.uint32).view(np.float32)
    yield np.array(SPECIALS, np.float32)


def ulps(got: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Errors of float32 ``got`` in float32 ulps at float64 ``truth``; inf where a result is wrong in kind."""
    expected = truth.astype(np.float32)
    same = (got == expected) | (np.isnan(got) & np.isnan(truth))
    exponent = np.floor(np.log2(np.maximum(np.abs(truth), 2.0 ** -149)))
    ulp = np.exp2(np.maximum(exponent, -126) - 23)
    error = np.abs(got.astype(np.float64) - truth) / ulp
    finite = np.isfinite(expected) & np.isfinite(got)
    return np.where(same, 0.0, np.where(finite, error, np.inf))


def run(built, x: np.ndarray) -> np.ndarray:
    import tvm

    device = tvm.cpu()
    out = tvm.runtime.tensor(np.zeros_like(x), device)
    built(tvm.runtime.tensor(x, device), out)
    return out.numpy()


def accuracy(name: str, variant: str, target, stride: int) -> dict:
    chunk = 1 << 20
    built = kernel(name, variant, chunk, target)
    worst = {"max_ulps": 0.0, "at": 0.0, "over_1_ulp": 0, "wrong_kind": 0, "wrong_kind_at": [], "max_abs": 0.0,
             "max_abs_at": 0.0}
    for x in float_sweep(stride, chunk):
        with np.errstate(all="ignore"):
            got = run(built, np.resize(x, chunk))[:len(x)]
            truth = TRUTH[name](x.astype(np.float64))
            error = ulps(got, truth)
            absolute = np.where(np.isinf(error) | ~np.isfinite(truth), -1, np.abs(got - truth))
        finite = np.where(np.isinf(error), -1, error)
        if finite.max() > worst["max_ulps"]:
            worst["max_ulps"], worst["at"] = float(finite.max()), float(x[np.argmax(finite)])
        if absolute.max() > worst["max_abs"]:
            worst["max_abs"], worst["max_abs_at"] = float(absolute.max()), float(x[np.argmax(absolute)])
        worst["over_1_ulp"] += int(np.sum(error > 1))
        worst["wrong_kind"] += int(np.sum(np.isinf(error)))
        worst["wrong_kind_at"] = (worst["wrong_kind_at"] + [float(v) for v in x[np.isinf(error)]])[:8]
    specials = {repr(float(v)): float(g) for v, g in zip(x, got, strict=True)}  # the last chunk
    return {"calls": library_calls(built), **worst, "specials": specials}


def timed(built, arrays, number: int, repeat: int) -> float:
    import tvm

    evaluator = built.time_evaluator(built.entry_name, tvm.cpu(), number=number, repeat=repeat)
    return statistics.median(evaluator(*arrays).results)


def loops(target, elements: int, number: int, repeat: int) -> dict:
    import tvm

    device = tvm.cpu()
    x = np.random.default_rng(0).normal(0, 4, elements).astype(np.float32)
    arrays = [tvm.runtime.tensor(x, device), tvm.runtime.tensor(np.zeros_like(x), device)]
    result = {}
    for name in ("silu", "sigmoid", "tanh", "gelu", "softmax-exp"):
        row = {}
        for label, variant in (("old", "libm"), ("new", "tunewise")):
            row[f"{label}_ms"] = timed(kernel(name, variant, elements, target, row=1000), arrays, number,
                                       repeat) * 1e3
        row["speedup"] = row["old_ms"] / row["new_ms"]
        result[name] = row
        print(name, row, flush=True)
    return result


def probe(trials: int) -> dict:
    """The probe model tuned by tunewise (``trials`` a task), its untuned and tuned latencies, with TVM's
    lowering of the transcendentals (``old``) and tunewise's (``new``)."""
    import torch

    from tunewise.budget import Budget
    from tunewise.job import workflow
    from tunewise.lowering import graph

    class Probe(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.silu(x) + torch.sigmoid(x) / 2

    x = torch.randn(1, 96, 112, 112, generator=torch.Generator().manual_seed(0))
    folder = tempfile.mkdtemp(prefix="transcendentals-")
    result = {}
    for label in ("old", "new"):
        patch = (mock.patch.object(graph, "tir_rewrites", lambda _target: []) if label == "old"
                 else contextlib.nullcontext())
        with patch:
            tuned = workflow.tune(Probe(), example_inputs=(x,), store=f"sqlite:///{folder}/{label}.db",
                                  budget=Budget(per_task_trials=trials), output=f"{folder}/{label}",
                                  compare_torch=False, time_untuned=True, progress=False, check_every=None,
                                  share="off")
        result[label] = {"tasks": tuned.tasks, "trials": tuned.trials, "untuned_ms": tuned.untuned_latency * 1e3,
                         "tuned_ms": tuned.tuned_latency * 1e3, "max_error": tuned.max_error}
        print(label, result[label], flush=True)
    return result


def epilogue(target, number: int, repeat: int) -> dict:
    """The ``epilogue`` part (the module's docstring)."""
    import torch
    import tvm
    from tvm import s_tir, te, tirx
    from tvm.s_tir import meta_schedule as ms

    from tunewise.importing import frontend
    from tunewise.lowering import spaces, tasks, transcendentals

    conv = torch.nn.Sequential(torch.nn.Conv2d(16, 96, 1), torch.nn.SiLU()).eval()
    x = torch.randn(1, 16, 112, 112, generator=torch.Generator().manual_seed(0))
    model = tasks.extract(frontend.load(conv, example_inputs=(x,)), target)
    [mod] = [m for m in model.task_mods if "conv2d" in m.script()]

    def blocks(sch) -> list[str]:
        return [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))]

    context = ms.TuneContext(mod, target=target, space_generator=spaces.generator(mod, target), rand_state=0)
    designs = context.generate_design_space()
    result = {"blocks": blocks(s_tir.Schedule(mod)), "spaces": len(designs),
              "spaces_blocks": [blocks(space) for space in designs],
              "spaces_inlining_it": sum(len([b for b in blocks(space) if "pad" not in b]) == 2 for space in designs)}
    n = 96 * 112 * 112
    a = te.placeholder((n,), "float32", name="a")
    one = tirx.const(1.0, "float32")
    bodies = {"silu": lambda i: a[i] * transcendentals.sigmoid(a[i]),
              "x/(1+x^2)": lambda i: a[i] / (one + a[i] * a[i]), "copy": lambda i: a[i] * (one + one)}
    device = tvm.cpu()
    values = np.random.default_rng(0).normal(0, 4, n).astype(np.float32)
    arrays = [tvm.runtime.tensor(values, device), tvm.runtime.tensor(np.zeros_like(values), device)]
    for name, body in bodies.items():
        out = te.compute((n,), body, name="out")
        for width in (16, 64):
            sch = s_tir.Schedule(te.create_prim_func([a, out]))
            outer, inner = sch.split(sch.get_loops(sch.get_sblock("out"))[0], [None, width])
            sch.parallel(outer)
            sch.vectorize(inner)
            result[f"{name}_by{width}_ms"] = timed(tvm.tirx.build(sch.mod, target=target), arrays, number,
                                                   repeat) * 1e3
    print("epilogue", result, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stride", type=int, default=64, help="test every STRIDE-th float32 bit pattern")
    parser.add_argument("--elements", type=int, default=1_200_000)
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--trials", type=int, default=32, help="MetaSchedule trials a task for the tuned probe")
    parser.add_argument("--parts", default="accuracy,loops,probe,epilogue")
    parser.add_argument("--out", default="bench/results/transcendentals.json")
    args = parser.parse_args()
    from tunewise import target as targets

    target = targets.resolve(None)
    parts = args.parts.split(",")
    result = {"target": str(target), "stride": args.stride}
    if "accuracy" in parts:
        result["accuracy"] = {}
        for name in FUNCTIONS:
            variants = ("tunewise", "libm") if name == "log" else ("tunewise", "libm", "topi")
            result["accuracy"][name] = {v: accuracy(name, v, target, args.stride) for v in variants}
            for v, found in result["accuracy"][name].items():
                print(name, v, {k: found[k] for k in ("calls", "max_ulps", "at", "over_1_ulp", "wrong_kind",
                                                      "wrong_kind_at", "max_abs", "max_abs_at")}, flush=True)
    if "loops" in parts:
        result["loops"] = loops(target, args.elements, args.number, args.repeat)
    if "probe" in parts:
        result["probe"] = probe(args.trials)
    if "epilogue" in parts:
        result["epilogue"] = epilogue(target, args.number, args.repeat)
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)


if __name__ == "__main__":
    main()
