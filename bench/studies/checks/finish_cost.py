"""Benchmark: what the steps after tuning take, step by step, against the time a budget keeps for them.

::

    .venv/bin/python bench/studies/checks/finish_cost.py --store sqlite:///resnet18.db --run 1 \\
        --out bench/studies/checks/results/finish-cost-resnet18.json

Resumes a copy of a stored run (the store itself is left as it is) with no trial to add, so that it goes
straight to the steps after tuning (:func:`tunewise.delivery.finish.finish`), as ``tunewise tune`` runs them by default:
compiling the tuned model and checking its outputs, exporting it for its timing process, timing it, timing
PyTorch eager and onnxruntime, saving the artifact. Each step is timed where it is called. The time a budget
keeps for them (:func:`tunewise.tuning.timebudget.compile_estimate`) is worked out from the measured build and
latency, beside what they took.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

import tunewise
from tunewise import stores
from tunewise.delivery import compile as compiler
from tunewise.delivery import timing
from tunewise.tuning import timebudget


@contextlib.contextmanager
def timed_calls(steps: dict[str, list[float]]):
    """Within the block, every call of the finishing steps' functions adds its seconds to ``steps``."""
    wrapped = [(compiler, "compile_checked", "compile and check outputs"),
               (timing, "time_models", "export and time the compiled model (its process)"),
               (timing, "time_references_on", "time the references (their process)"),
               (compiler.CompiledModel, "save", "save the artifact (an export)")]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in wrapped]

    def timer(function, step):
        def call(*args, **kwargs):
            start = time.perf_counter()
            result = function(*args, **kwargs)
            steps[step].append(time.perf_counter() - start)
            return result
        return call

    for (owner, name, step), (_, _, original) in zip(wrapped, originals, strict=True):
        setattr(owner, name, timer(original, step))
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="a SQLite store URL holding the run")
    parser.add_argument("--run", type=int, default=1)
    parser.add_argument("--out", required=True, help="result file (.json)")
    args = parser.parse_args()
    steps: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="finish-cost-") as work:
        copy = f"{work}/store.db"
        shutil.copy(args.store.removeprefix("sqlite:///"), copy)
        with contextlib.closing(stores.create(f"sqlite:///{copy}", must_exist=True)) as stored:
            trials = len(stored.get_trials(args.run, records=False))
        start = time.perf_counter()
        with timed_calls(steps):
            result = tunewise.resume(args.run, store=f"sqlite:///{copy}", budget={"max_trials": trials},
                                     output=f"{work}/artifact", progress=False)
        whole = time.perf_counter() - start
    [build] = steps["compile and check outputs"]
    kept = timebudget.compile_estimate(build, None, result.tuned_latency)
    record = {"store": args.store, "run": args.run, "trials": trials, "tuned_latency_s": result.tuned_latency,
              "steps_s": dict(steps), "after_tuning_s": result.phase_seconds["compile"], "resume_s": whole,
              "compile_estimate_s": kept}
    with open(args.out if args.out.endswith(".json") else f"{args.out}.json", "w") as f:
        json.dump(provenance.stamped(record), f, indent=1)
    for step, seconds in steps.items():
        print(f"{step:40s} {' '.join(f'{s:6.1f}' for s in seconds)} s")
    print(f"the steps after tuning took {result.phase_seconds['compile']:.1f} s; the budget kept {kept:.1f} s for them")


if __name__ == "__main__":
    main()
