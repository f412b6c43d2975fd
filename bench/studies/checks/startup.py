"""Benchmark: how soon a new tuning run measures its first trials, from the launch of a fresh process.

::

    .venv/bin/python bench/studies/checks/startup.py resnet18 --repeats 3 --out bench/results/startup-resnet18.json

Each repeat is a fresh Python process that imports tunewise and runs :func:`tunewise.job.prepare.prepare_run` on
the model with a new in-memory store and a one-slot budget (16 trials, the default slot), then the session.
It records, in seconds since the process started its script: each step the run announces (importing,
extracting), the first slot's phases (search, build, measure), the end of its measurements (``default
latencies``: every task's default latency is measured next), and the slot being recorded. The JSON holds
the command line, the commit, the CPU model (:mod:`provenance`), every repeat's timeline and the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

CHILD = r"""
import json, sys, time
start = time.perf_counter()
from tunewise.job import prepare
from tunewise.callbacks import Callback
from tunewise.tuning.session import Budget
from tunewise.settings import RunSettings

times = {}

class Clock(Callback):
    def phase(self, text):
        times.setdefault(text, time.perf_counter() - start)

    def slot_phase(self, snapshot, task, phase):
        times.setdefault("slot 0 " + phase, time.perf_counter() - start)
        times["slot 0 task"] = snapshot.tasks[task].name

    def slot_recorded(self, event, snapshot):
        times.setdefault("slot 0 recorded", time.perf_counter() - start)

settings = RunSettings(source=sys.argv[1], budget=Budget(max_trials=16))
with prepare.prepare_run(None, settings, store="sqlite://", callbacks=[Clock()]) as prepared:
    prepared.session.run()
print(json.dumps(times))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", nargs="?", default="resnet18")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    for _ in range(args.repeats):
        done = subprocess.run([sys.executable, "-c", CHILD, args.model], capture_output=True, text=True,
                              check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(rows[-1])
    keys = [k for k, v in rows[0].items() if isinstance(v, float)]
    medians = {k: statistics.median(r[k] for r in rows if k in r) for k in keys}
    for key, value in medians.items():
        print(f"{key:40s} {value:6.1f} s")
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(provenance.stamped({"model": args.model, "repeats": rows, "medians": medians}), f, indent=1)


if __name__ == "__main__":
    main()
