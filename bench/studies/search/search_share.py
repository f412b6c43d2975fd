"""Where a slot's time goes late in a run: the evolutionary search against building and measuring.

::

    .venv/bin/python bench/studies/search/search_share.py --store sqlite:///resnet18.db --run 1 --trials 96 \\
        --out bench/studies/search/results/search-share-resnet18.json

Resumes a copy of a stored run (the store itself is left as it is) for ``--trials`` more trials, as
``tunewise tune --resume`` would, and records every slot: its task, trials and seconds, split into the search
(the proposals: MetaSchedule's evolutionary search, or schedules transferred from another task), building and
measuring, and the rest (recording, the cost model's update). MetaSchedule's profiler splits the searches'
time by their steps (sampling the first population, mutating, scoring by the cost model, ...). The resumed
run is compiled and verified at the end, without timing its references.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections import defaultdict

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

import tunewise
from tunewise import stores
from tunewise.callbacks import SlotLog


def resumed_slots(url: str, run: int, trials: int, work: str) -> dict:
    """``run`` of the SQLite store at ``url``, copied into ``work`` and resumed for ``trials`` more trials:
    every slot's seconds by part, and the searches' seconds by MetaSchedule profiler step."""
    from tvm.s_tir import meta_schedule as ms

    copy = f"{work}/store.db"
    shutil.copy(url.removeprefix("sqlite:///"), copy)
    stored = stores.create(f"sqlite:///{copy}", must_exist=True)
    names = {t.index: t.name for t in stored.get_tasks(run)}
    before = len(stored.get_trials(run, records=False))
    log = SlotLog()
    with ms.Profiler() as profiler:
        tunewise.resume(run, store=f"sqlite:///{copy}", budget={"max_trials": before + trials, "time_budget": 10**6},
                        callbacks=[log], compare_torch=False, timing_rounds=3, output=f"{work}/artifact",
                        progress=False)
    slots = [{"slot": e.slot, "task": names[e.task], "trials": e.trials, "shared": e.shared,
              "seconds": e.seconds, "search_s": e.search_seconds, "build_and_measure_s": e.measure_seconds,
              "rest_s": e.seconds - e.search_seconds - e.measure_seconds} for e in log.events]
    searching = [s for s in slots if not s["shared"]]
    steps = {str(name): float(seconds) for name, seconds in profiler.get().items() if name.startswith("EvoSearch/")}
    return {"trials_before": before, "slots": slots, "search_steps_s": steps,
            "searching_slots": summary(searching), "transfer_slots": summary([s for s in slots if s["shared"]]),
            "by_task": {task: summary([s for s in searching if s["task"] == task])
                        for task in sorted({s["task"] for s in searching})}}


def summary(slots: list[dict]) -> dict:
    """Total seconds of ``slots`` by part, and the search's share of the whole."""
    total = defaultdict(float)
    for slot in slots:
        for key in ("seconds", "search_s", "build_and_measure_s", "rest_s", "trials"):
            total[key] += slot[key]
    return {"slots": len(slots), **total,
            "search_share": total["search_s"] / total["seconds"] if total["seconds"] else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="a SQLite store URL holding the run")
    parser.add_argument("--run", type=int, default=1)
    parser.add_argument("--trials", type=int, default=96, help="trials to add to the run")
    parser.add_argument("--out", required=True, help="result file (.json)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="search-share-") as work:
        result = {"store": args.store, "run": args.run, **resumed_slots(args.store, args.run, args.trials, work)}
    with open(args.out if args.out.endswith(".json") else f"{args.out}.json", "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)
    searching = result["searching_slots"]
    print(f"{searching['slots']} searching slots: {searching['seconds']:.0f} s, of which search "
          f"{searching['search_s']:.0f} s ({searching['search_share']:.0%}), building and measuring "
          f"{searching['build_and_measure_s']:.0f} s")
    for name, seconds in sorted(result["search_steps_s"].items(), key=lambda item: -item[1]):
        print(f"  {name:45s} {seconds:7.1f} s")


if __name__ == "__main__":
    main()
