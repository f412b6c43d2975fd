"""How far apart the machine's two cores are, minute by minute, beside a compiled model's latency.

On a 2-core virtual machine the two virtual CPUs can sit on cores that share a last-level cache or on cores
that do not, and the hypervisor moves them while a benchmark runs. This times both, in turn, for
``--seconds``: the one-way latency of a cache line passed between a thread pinned to CPU 0 and one pinned to
CPU 1 (``host_cores.Probe``), then the compiled model ``ARTIFACT``
(median of ``--calls`` calls on the seeded example inputs of ``--model``). Writes every pair, and the model's
median latency at the minutes when the cores were near (a latency under twice the lowest seen) and far::

    .venv/bin/python bench/studies/estimate/cross_core.py ART --model mobilenetv2 \
        --out bench/studies/estimate/results/cross-core-mobilenetv2.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance
from host_cores import Probe, is_near
from time_artifacts import add_artifact_arguments, load_artifact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_artifact_arguments(parser)
    parser.add_argument("--seconds", type=float, default=200)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import tvm

    compiled, _, inputs = load_artifact(args)
    arrays = [tvm.runtime.tensor(x, compiled.device) for x in inputs]
    call = compiled.vm["main"]
    for _ in range(10):
        call(*arrays)
    pairs = []
    with Probe() as probe:
        start = time.time()
        while time.time() - start < args.seconds:
            nanoseconds = probe.one_way_ns()
            seconds = []
            for _ in range(args.calls):
                begin = time.perf_counter()
                call(*arrays)
                seconds.append(time.perf_counter() - begin)
            pairs.append({"at_s": time.time() - start, "cross_core_ns": nanoseconds,
                          "model_ms": 1e3 * statistics.median(seconds)})
    lowest = min(p["cross_core_ns"] for p in pairs)
    summary = {}
    for name, chosen in (("near", [p for p in pairs if is_near(p["cross_core_ns"], lowest)]),
                         ("far", [p for p in pairs if not is_near(p["cross_core_ns"], lowest)])):
        if chosen:
            summary[name] = {"pairs": len(chosen),
                             "cross_core_ns": statistics.median(p["cross_core_ns"] for p in chosen),
                             "model_ms": statistics.median(p["model_ms"] for p in chosen)}
    result = {"artifact": args.artifact, "model": args.model, "summary": summary, "pairs": pairs}
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)
    print(summary)


if __name__ == "__main__":
    main()
