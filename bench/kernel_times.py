"""Where a compiled model's time goes: each kernel's wall time inside the model, call by call.

::

    .venv/bin/python bench/kernel_times.py tunewise-out/MODEL --out bench/results/current/kernel-times-MODEL.json

Loads the artifact, calls it on random inputs of its metadata's shapes (``--warmup`` calls first), then times
``--calls`` calls with the Relax VM's instrument, which is told before and after every call the VM makes (each
kernel, and the VM's own builtins: allocations, views, tuples). The instrument's own cost (a Python call each
side) is in every figure; the model's time a call without it is given beside. ``--out`` holds each callee's
microseconds a model call and calls a model call, slowest first, with the command line, the commit and the CPU
model (:mod:`provenance`).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time

import numpy as np
import provenance

from tunewise.delivery import compile as compiler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifact")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import tvm

    compiled = compiler.load(args.artifact)
    vm, rng = compiled.vm, np.random.default_rng(0)
    inputs = [tvm.runtime.tensor(rng.standard_normal(spec["shape"]).astype(spec["dtype"]), compiled.device)
              for spec in compiled.metadata["inputs"]]
    for _ in range(args.warmup):
        vm["main"](*inputs)
    start = time.perf_counter()
    for _ in range(args.calls):
        vm["main"](*inputs)
    plain = (time.perf_counter() - start) / args.calls
    seconds, calls, began = collections.Counter(), collections.Counter(), {}

    def instrument(_func, name, before, _ret, *_args):
        if before:
            began[name] = time.perf_counter()
        else:
            seconds[name] += time.perf_counter() - began[name]
            calls[name] += 1
        return 0

    vm.set_instrument(instrument)
    for _ in range(args.calls):
        vm["main"](*inputs)
    kernels = [{"callee": name, "us": total / args.calls * 1e6, "calls": calls[name] // args.calls}
               for name, total in seconds.most_common()]
    result = {"artifact": os.path.abspath(args.artifact), "model": compiled.metadata.get("model"),
              "precision": compiled.metadata.get("precision"), "model_ms": plain * 1e3,
              "instrumented_ms": sum(seconds.values()) / args.calls * 1e3, "kernels": kernels}
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)
    for row in kernels[:25]:
        print(f"{row['us']:9.1f} us {row['calls']:4d}x {row['callee']}")
    print(f"model {plain * 1e3:.3f} ms a call; instrumented {result['instrumented_ms']:.3f} ms")


if __name__ == "__main__":
    main()
