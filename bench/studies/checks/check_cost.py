"""Benchmark: what a whole-model check costs (:mod:`tunewise.tuning.model_checks`), to choose how often a run checks.

::

    .venv/bin/python bench/studies/checks/check_cost.py --model resnet18 --checks 3 \
        --out bench/results/check-cost-resnet18.json

Extracts the model, tunes it for ``--trials`` trials (so the check applies tuned records, as in a run), then
makes ``--checks`` checks in turn: compile with the best records, verify the outputs, time the model in a
fresh process. Records each check's seconds and the latency it measured, and the interval at which checks
would cost 10 % of tuning time (ten times the median check). The JSON holds the command line, the commit and
the CPU model (:mod:`provenance`).
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

from tunewise import stores
from tunewise.job import prepare
from tunewise.settings import RunSettings
from tunewise.tuning.model_checks import ModelCheck
from tunewise.tuning.session import Budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--checks", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()
    settings = RunSettings(source=args.model, budget=Budget(max_trials=args.trials))
    with prepare.prepare_run(None, settings, store=stores.create("sqlite://")) as prepared:
        prepared.session.run()
        model, database = prepared.session.model, prepared.session.database
        check, rows = ModelCheck(), []
        for _ in range(args.checks):
            start = time.perf_counter()
            latency, message = check.measure(model, database)
            rows.append({"seconds": time.perf_counter() - start, "latency_s": latency, "message": message})
            print(rows[-1], flush=True)
    median = statistics.median(r["seconds"] for r in rows)
    result = {"model": args.model, "trials": args.trials, "target": str(model.target), "checks": rows,
              "median_check_seconds": median, "interval_for_10_percent_s": 10 * median}
    print(f"median check {median:.1f} s: checks cost 10 % of tuning time at one every {10 * median:.0f} s")
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(provenance.stamped(result), f, indent=1)


if __name__ == "__main__":
    main()
