"""Benchmark: an artifact under TVM runtime thread settings, the settings taking turns round by round.

::

    .venv/bin/python bench/studies/checks/thread_settings.py --model MODEL ART/MODEL --rounds 30 \\
        --out bench/studies/checks/results/thread-settings-MODEL.json

Each setting is a fresh process of its own (a :mod:`tunewise.tuning.workers` process, the environment set before TVM
starts its thread pool) that loads the artifact as ``tunewise.delivery.timing`` does; the processes then take turns,
a round (:data:`tunewise.delivery.timing.ROUND_MS` or more of calls) each, ``--rounds`` times, the order turned by
one each time (a round's threads spin a while after it, into the next process's round). Per setting: its median
latency and its median ratio to the default's in the same round. The settings: ``default`` (TVM's thread pool
as ``tunewise`` runs it: the target's cores, threads bound to CPUs, a spin of 300,000 before a worker
sleeps), ``unbound`` (``TVM_BIND_THREADS=0``: the OS places the threads, as onnxruntime's are) and ``no-spin``
(``TVM_THREAD_POOL_SPIN_COUNT=0``: a worker sleeps at once).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance
from time_artifacts import add_artifact_arguments, load_artifact

from tunewise.delivery import timing
from tunewise.tuning import workers

SETTINGS = {"default": {}, "unbound": {"TVM_BIND_THREADS": "0"}, "no-spin": {"TVM_THREAD_POOL_SPIN_COUNT": "0"}}


def load_with(environment: dict, library: str, target: str, inputs) -> float:
    """In a worker process: set ``environment``, then load ``library`` as the timing process does."""
    os.environ.update(environment)
    return timing._load_tvm([library], target, inputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_artifact_arguments(parser)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out")
    args = parser.parse_args()
    compiled, _, inputs = load_artifact(args)
    pools = {name: workers.WorkerPool(1) for name in SETTINGS}
    samples: dict[str, list[float]] = {name: [] for name in SETTINGS}
    try:
        with tempfile.TemporaryDirectory(prefix="thread-settings-") as directory:
            library = os.path.join(directory, "model.so")
            compiled.export_library(library)
            for name, pool in pools.items():
                pool.submit(load_with, SETTINGS[name], library, str(compiled.target), inputs).result()
            names = list(pools)
            for r in range(args.rounds):  # each setting's round after each other's in turn: a round ends with
                for name in names[r % len(names):] + names[:r % len(names)]:  # its threads spinning a while
                    samples[name].append(pools[name].submit(timing._tvm_round).result()[0])
    finally:
        for pool in pools.values():
            pool.shutdown()
    summary = {name: {"median": statistics.median(xs),
                      "to_default": statistics.median(x / d for x, d in zip(xs, samples["default"], strict=True))}
               for name, xs in samples.items()}
    for name, s in summary.items():
        print(f"{name:8s} {1e3 * s['median']:.3f} ms, {s['to_default']:.3f}x the default in the same round")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(provenance.stamped({"artifact": args.artifact, "target": str(compiled.target),
                                          "settings": SETTINGS, "samples": samples, "summary": summary}), f,
                      indent=1)


if __name__ == "__main__":
    main()
