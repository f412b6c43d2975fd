"""Benchmark: one artifact timed without pause in one process, to tell the host's drift from the process's state.

A compiled model's latency can differ 2x between two fresh processes on a shared VM. If it is the process
(its memory layout, where its threads landed), one process's latency holds still; if it is the host (another
tenant on the same physical cores), it moves within one process too. This loads the artifact once, on
``--threads`` TVM threads, and times back-to-back rounds of at least ``--round-ms`` for ``--seconds``, each
round's mean latency kept with its start time; the inputs are random, seeded, of the artifact's input shapes::

    .venv/bin/python bench/studies/checks/latency_drift.py ARTIFACT --seconds 60 \
        --out bench/studies/checks/results/latency-drift-NAME

Writes ``OUT.json``: every round ``(start s, latency s)`` and the median, min and max.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise.delivery import compile as compiler
from tunewise.tuning import tvm_env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("artifact")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--round-ms", type=int, default=500)
    parser.add_argument("--threads", type=int, default=None, help="default: the artifact target's num-cores")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    compiled = compiler.load(args.artifact)
    if args.threads:
        tvm_env.use_threads(args.threads)
    else:
        tvm_env.use_target_threads(compiled.target)
    rng = np.random.default_rng(args.seed)
    inputs = [rng.standard_normal(x["shape"]).astype(x["dtype"]) for x in compiled.metadata["inputs"]]
    compiled(*inputs)  # warm-up
    rounds, start = [], time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        at = time.perf_counter() - start
        rounds.append((at, compiled.time(*inputs, repeat=1, min_repeat_ms=args.round_ms).mean))
    latencies = [latency for _, latency in rounds]
    summary = {"median_s": statistics.median(latencies), "min_s": min(latencies), "max_s": max(latencies)}
    print(" ".join(f"{latency * 1e3:.3f}" for latency in latencies))
    print(json.dumps(summary))
    if args.out:
        with open(args.out + ".json", "w") as f:
            json.dump(provenance.stamped({"artifact": args.artifact, "model": compiled.metadata.get("model"),
                                         "target": str(compiled.target), "round_ms": args.round_ms,
                                         **summary, "rounds": rounds}), f, indent=1)


if __name__ == "__main__":
    main()
