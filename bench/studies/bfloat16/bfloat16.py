"""Benchmark: what bfloat16 buys on a CPU with AMX, in OpenVINO and in a TVM kernel on AMX tiles.

::

    .venv/bin/python bench/studies/bfloat16/bfloat16.py --out bench/results/bfloat16.json

Two parts, one JSON (with :mod:`provenance`); both need a CPU with AMX (``amx-bf16``) and the ``openvino``
package:

- ``references``: held-out models of :mod:`heldout_models` (``--models``, by default ``resnet50`` and ``minilm``)
  exported to ONNX and timed in one process, taking turns round by round (``--rounds`` rounds of at least 100 ms,
  batch 1, all cores): onnxruntime, OpenVINO in ``f32`` and in its default precision (``INFERENCE_PRECISION_HINT``,
  recorded), PyTorch eager in float32. Each output's largest error against PyTorch's float32, relative to the
  output's largest magnitude, and for a 1000-class output how often the arg-max agrees over ``--samples`` random
  inputs.
- ``kernel``: ``C = A @ B`` (float32 ``C``, bfloat16 ``A`` and ``B``) at the matrix shapes of those models, as one
  TVM kernel tensorized with :func:`tunewise.lowering.amx.amx_bf16_intrinsic` (``A`` in pairs; ``B`` in AMX's
  pairs ``B2[k // 2, n, k % 2]`` or in 32-column panels ``B4[n // 32, k // 2, n % 32, k % 2]``), against
  PyTorch's matmul in float32 and in bfloat16 (oneDNN), all on all cores: median time and GFLOP/s. For MiniLM's
  products, also the kernel MetaSchedule finds in ``--trials`` trials with the intrinsic (:func:`searched_kernel`).
  A shape is computed in whole 32 x 32 blocks (padded; ``computed``), its GFLOP/s counted on the shape itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the held-out models

import provenance

# (name, M, K, N): the matrix products of the two models, M the rows of activations
SHAPES = [("minilm qkv", 128, 384, 1152), ("minilm ffn up", 128, 384, 1536), ("minilm ffn down", 128, 1536, 384),
          ("resnet50 1x1 56x56 64->256", 3136, 64, 256), ("resnet50 1x1 14x14 1024->256", 196, 1024, 256),
          ("resnet50 classifier", 1, 2048, 1000)]


def side_by_side(calls: dict, rounds: int) -> dict:
    """Median seconds a call of each of ``calls`` (name -> call), the calls taking turns round by round, a round
    as tunewise times one (:func:`tunewise.delivery.timing._round_time`: at least 100 ms after an untimed call)."""
    from tunewise.delivery import timing

    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times[name].append(timing._round_time(call))
    return {name: statistics.median(t) for name, t in times.items()}


def references(models: list[str], rounds: int, samples: int) -> list[dict]:
    import heldout_models
    import onnxruntime
    import openvino
    import torch

    core = openvino.Core()
    default_precision = core.get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()  # bf16 with AMX
    results = []
    for name in models:
        model, example = heldout_models.build(name)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, f"{name}.onnx")
            torch.onnx.export(model, example, path, dynamo=False, input_names=["x"])
            session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
            compiled = {hint: core.compile_model(path, "CPU", {"PERFORMANCE_HINT": "LATENCY",
                                                               "INFERENCE_PRECISION_HINT": hint})
                        for hint in ("f32", default_precision)}
        x = example[0].numpy()
        requests = {hint: c.create_infer_request() for hint, c in compiled.items()}

        def eager(model=model, x=example[0]):
            with torch.no_grad():
                model(x)

        calls = {"onnxruntime": lambda s=session, x=x: s.run(None, {"x": x}), "torch_eager": eager}
        calls.update({f"openvino_{hint}": (lambda r=r, x=x: r.infer({0: x})) for hint, r in requests.items()})
        latencies = side_by_side(calls, rounds)
        errors, agree = {hint: [] for hint in requests}, {hint: 0 for hint in requests}
        generator = torch.Generator().manual_seed(1)
        for _ in range(samples):
            sample = torch.randn(example[0].shape, generator=generator)
            with torch.no_grad():
                truth = model(sample).numpy()
            for hint, request in requests.items():
                out = request.infer({0: sample.numpy()})[0]
                errors[hint].append(float(np.abs(out - truth).max() / np.abs(truth).max()))
                agree[hint] += int(out.argmax() == truth.argmax())
        entry = {"model": name, "input": list(x.shape), "latency_ms": {k: v * 1e3 for k, v in latencies.items()},
                 "default_precision": default_precision,
                 "relative_error": {hint: max(e) for hint, e in errors.items()}, "samples": samples}
        if truth.shape[-1] == 1000:
            entry["argmax_agreement"] = {hint: n / samples for hint, n in agree.items()}
        print(json.dumps(entry))
        results.append(entry)
    return results


def product(m: int, k: int, n: int, packed: bool):
    """The PrimFunc of ``C = A @ B`` with ``A`` in pairs and ``B`` in pairs (``packed``: in 32-column panels)."""
    from tvm import te

    a = te.placeholder((m, k // 2, 2), "bfloat16", name="A")
    ko, ki = te.reduce_axis((0, k // 2), "ko"), te.reduce_axis((0, 2), "ki")
    if packed:
        b = te.placeholder((n // 32, k // 2, 32, 2), "bfloat16", name="B")
        c = te.compute((m, n), lambda i, j: te.sum(
            a[i, ko, ki].astype("float32") * b[j // 32, ko, j % 32, ki].astype("float32"), axis=[ko, ki]), name="C")
    else:
        b = te.placeholder((k // 2, n, 2), "bfloat16", name="B")
        c = te.compute((m, n), lambda i, j: te.sum(
            a[i, ko, ki].astype("float32") * b[ko, j, ki].astype("float32"), axis=[ko, ki]), name="C")
    return te.create_prim_func([a, b, c])


def amx_kernel(m: int, k: int, n: int, packed: bool, cores: int):
    """The TVM kernel ``C = A @ B`` on AMX: rows and columns in 32 x 32 blocks (each the whole depth ``k``, so the
    accumulators stay in tiles), four column blocks a task, tasks spread over ``cores``."""
    import tvm

    from tunewise.lowering.amx import amx_bf16_intrinsic
    from tunewise.target import host_cpu

    sch = tvm.s_tir.Schedule(product(m, k, n, packed))
    block = sch.get_sblock("C")
    i, j, k0, k1 = sch.get_loops(block)
    columns = 4 if (n // 32) % 4 == 0 else 1
    jo, jt, ji = sch.split(j, [None, columns, 32])
    io, ii = sch.split(i, [None, 32])
    sch.reorder(jo, io, jt, ii, ji, k0, k1)
    sch.parallel(sch.fuse(jo, io))
    sch.decompose_reduction(block, jt)
    sch.tensorize(ii, amx_bf16_intrinsic(k))
    target = tvm.target.Target({**host_cpu(), "num-cores": cores})
    return tvm.tirx.build(sch.mod, target=target)


def searched_kernel(m: int, k: int, n: int, trials: int, seed: int = 0):
    """The kernel of :func:`product` (panels) that MetaSchedule finds in ``trials`` trials in tunewise's space of
    an AMX product (:func:`tunewise.lowering.spaces.amx_generator`, on the intrinsic of
    :func:`tunewise.lowering.spaces.amx_depth`), its runner enabling AMX; and how long the search took."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tunewise.lowering import spaces
    from tunewise.lowering.amx import enable_amx
    from tunewise.target import host_cpu

    mod = tvm.IRModule({"main": product(m, k, n, True).with_attr("global_symbol", "main")})
    target = tvm.target.Target(host_cpu())
    depth = spaces.amx_depth(mod, target)
    space = spaces.amx_generator(depth)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        database = ms.tune_tir(mod, target, work, max_trials_global=trials, num_trials_per_iter=32, space=space,
                               runner=ms.runner.LocalRunner(initializer=enable_amx), seed=seed)
        sch = ms.tir_integration.compile_tir(database, mod, target)
    return tvm.tirx.build(sch.mod, target=target), depth, time.perf_counter() - start


def pad(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def kernel(rounds: int, trials: int) -> list[dict]:
    import ml_dtypes
    import torch
    import tvm

    from tunewise.lowering.amx import enable_amx
    from tunewise.tuning.tvm_env import use_threads

    enable_amx()
    results, cores = [], os.cpu_count()
    use_threads(cores)
    torch.set_num_threads(cores)
    for name, m, k, n in SHAPES:
        mp, kp, np_ = pad(m, 32), pad(k, 32), pad(n, 32)  # the kernel computes whole 32 x 32 blocks
        rng = np.random.default_rng(0)
        a = rng.standard_normal((mp, kp)).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((kp, np_)).astype(ml_dtypes.bfloat16)
        truth = a.astype(np.float32) @ b.astype(np.float32)
        layouts = {"pairs": b.reshape(kp // 2, 2, np_).transpose(0, 2, 1),
                   "panels": b.reshape(kp // 2, 2, np_ // 32, 32).transpose(2, 0, 3, 1)}
        entry = {"shape": name, "m": m, "k": k, "n": n, "computed": [mp, kp, np_], "ms": {}, "gflops": {}}
        calls = {}
        for layout, packed in layouts.items():
            lib = amx_kernel(mp, kp, np_, layout == "panels", cores)
            args = [tvm.runtime.tensor(a.reshape(mp, kp // 2, 2)), tvm.runtime.tensor(np.ascontiguousarray(packed)),
                    tvm.runtime.tensor(np.zeros((mp, np_), np.float32))]
            lib(*args)
            entry.setdefault("max_error", {})[layout] = float(np.abs(args[2].numpy() - truth).max()
                                                              / np.abs(truth).max())
            calls[f"amx_{layout}"] = (lambda f=lib[lib.entry_name], x=args: f(*x))  # called as PyTorch's are
        if trials and name.startswith("minilm"):
            lib, depth, seconds = searched_kernel(mp, kp, np_, trials)
            args = [args[0], tvm.runtime.tensor(np.ascontiguousarray(layouts["panels"])), args[2]]
            args[2].copyfrom(np.zeros((mp, np_), np.float32))
            lib(*args)
            entry["max_error"]["searched"] = float(np.abs(args[2].numpy() - truth).max() / np.abs(truth).max())
            entry["searched"] = {"trials": trials, "depth": depth, "seconds": seconds}
            calls["amx_searched"] = (lambda f=lib[lib.entry_name], x=args: f(*x))
        x32, w32 = torch.randn(m, k), torch.randn(k, n)
        x16, w16 = x32.bfloat16(), w32.bfloat16()
        calls["torch_float32"] = lambda x=x32, w=w32: x @ w
        calls["torch_bfloat16"] = lambda x=x16, w=w16: x @ w
        for key, seconds in side_by_side(calls, rounds).items():
            entry["ms"][key] = seconds * 1e3
            entry["gflops"][key] = 2 * m * k * n / seconds / 1e9
        print(json.dumps(entry))
        results.append(entry)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="references,kernel")
    parser.add_argument("--models", default="resnet50,minilm")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--trials", type=int, default=64, help="MetaSchedule trials a searched kernel (0: none)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import tvm

    from tunewise.target import host_cpu, isa_class

    cpu = host_cpu()
    if isa_class(tvm.target.Target(cpu)) != "amx":
        sys.exit(f"this study needs a CPU with AMX bfloat16; this one is {cpu['mcpu']!r}")
    result = {"cpu": cpu, "cores": os.cpu_count()}
    parts = args.parts.split(",")
    if "references" in parts:
        result["references"] = references(args.models.split(","), args.rounds, args.samples)
    if "kernel" in parts:
        result["kernel"] = kernel(args.rounds, args.trials)
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)


if __name__ == "__main__":
    main()
