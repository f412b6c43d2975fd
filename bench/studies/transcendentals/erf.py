"""Benchmark: GELU with the scalar ``erf`` against TOPI's ``fast_erf``, one kernel, one schedule.

::

    .venv/bin/python bench/studies/transcendentals/erf.py --shape 128,1024 --out bench/results/erf.json

``torch.nn.GELU`` on a float32 tensor of ``--shape`` (the bundled Transformer's feed-forward activation by
default) is imported and lowered at graph level ``decompose`` (``erf`` as it imports: LLVM calls the scalar
library ``erff`` for every element) and at ``fold-bn`` (:func:`tunewise.lowering.graph.vectorisable_erf`). Each level
gives one task; both get the schedule MetaSchedule's CPU rules give such an elementwise kernel (every block
inlined into the last, its loops fused, split by 64, the outer part parallel, the inner vectorised), are
built for this CPU and timed by TVM's ``time_evaluator`` (median of ``--repeat`` repeats of ``--number``
calls). The JSON holds both times, their ratio, the largest error of each against ``torch.nn.GELU`` (exact
``erf``) and :mod:`provenance`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import numpy as np

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance
import torch

from tunewise import target as targets
from tunewise.importing import frontend
from tunewise.lowering import tasks


def scheduled(mod):
    """``mod``'s one elementwise kernel, inlined into its last block, parallel and vectorised by 64."""
    from tvm import s_tir

    sch = s_tir.Schedule(mod)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    for block in blocks[:-1]:
        sch.compute_inline(block)
    outer, inner = sch.split(sch.fuse(*sch.get_loops(blocks[-1])), [None, 64])
    sch.parallel(outer)
    sch.vectorize(inner)
    return sch.mod


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="128,1024")
    parser.add_argument("--number", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", default="bench/results/erf.json")
    args = parser.parse_args()
    import tvm

    shape = tuple(int(d) for d in args.shape.split(","))
    target = targets.resolve(None)
    x = 3 * torch.randn(shape, generator=torch.Generator().manual_seed(0))
    expected = torch.nn.functional.gelu(x).numpy()
    imported = frontend.load(torch.nn.GELU(), example_inputs=(x,))
    device = tvm.cpu()
    result = {"shape": list(shape), "target": str(target)}
    for label, level in (("erf", "decompose"), ("fast_erf", "fold-bn")):
        (mod,) = tasks.extract(imported, target, level=level).task_mods
        kernel = tvm.tirx.build(scheduled(mod), target=target)
        data, out = tvm.runtime.tensor(x.numpy(), device), tvm.runtime.tensor(np.zeros(shape, "float32"), device)
        seconds = kernel.time_evaluator(kernel.entry_name, device, number=args.number, repeat=args.repeat)(
            data, out).results
        result[label] = {"level": level, "median_us": statistics.median(seconds) * 1e6,
                         "max_abs_error": float(np.max(np.abs(out.numpy() - expected)))}
        print(label, result[label], flush=True)
    result["speedup"] = result["erf"]["median_us"] / result["fast_erf"]["median_us"]
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)
    print(f"fast_erf is {result['speedup']:.1f}x faster")


if __name__ == "__main__":
    main()
