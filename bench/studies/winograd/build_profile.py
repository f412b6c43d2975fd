"""Benchmark: where the seconds of building one candidate go, pass by pass.

Takes a finished run from a store and builds each task's best record again as the tuning builder does
(:func:`tunewise.tuning.build.build_candidate`), timed whole and under TVM's pass-timing instrument, then exports it
as the runner loads it. For each task: the build's seconds, the export's, and the passes that took the most::

    .venv/bin/python bench/studies/winograd/build_profile.py --store sqlite:///STORE.db --run 1 \\
        --tasks winograd,conv2d \\
        --out bench/studies/winograd/results/build-profile

Writes ``OUT.json`` when ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import stores
from tunewise import target as targets
from tunewise.tuning import tvm_env
from tunewise.tuning.build import build_candidate, export_candidate


def pass_seconds(rendered: str) -> dict[str, float]:
    """The seconds of each pass in the pass-timing instrument's report ``rendered``, each pass's own time (without
    the passes it ran), summed over its runs."""
    spent: dict[str, float] = {}
    for line in rendered.splitlines():
        found = re.match(r"\s*([\w.]+): \d+us \[(\d+)us\]", line)
        if found:
            spent[found.group(1)] = spent.get(found.group(1), 0.0) + int(found.group(2)) / 1e6
    return spent


def profile(mod, target, top: int) -> dict:
    """Build ``mod`` (a scheduled TIR module) for ``target`` twice, plainly and instrumented, and export it."""
    import tvm
    from tvm.ir.instrument import PassTimingInstrument

    started = time.perf_counter()
    built = build_candidate(mod, target)
    build = time.perf_counter() - started
    started = time.perf_counter()
    export_candidate(built)
    export = time.perf_counter() - started
    timing = PassTimingInstrument()
    with tvm.transform.PassContext(instruments=[timing]):
        build_candidate(mod, target)
        spent = pass_seconds(timing.render())
    slowest = dict(sorted(spent.items(), key=lambda item: -item[1])[:top])
    return {"build_s": round(build, 3), "export_s": round(export, 3), "passes_s": round(sum(spent.values()), 3),
            "slowest_passes_s": {name: round(s, 3) for name, s in slowest.items()},
            "tir_chars": len(mod.script())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--tasks", default="", help="comma-separated parts of task names to profile (default: all)")
    parser.add_argument("--top", type=int, default=6, help="passes to list per task")
    parser.add_argument("--out")
    args = parser.parse_args()
    tvm_env.prepare("llvm")
    store = stores.create(args.store)
    run = store.get_run(args.run)
    target = targets.resolve(run.target)
    database = stores.StoreDatabase(store, run=args.run, target=target)
    wanted = [part for part in args.tasks.split(",") if part]
    rows = []
    for task in store.get_tasks(args.run):
        if wanted and not any(part in task.name for part in wanted):
            continue
        top = database.get_top_k(database.workload(task.workload), 1)
        if not top:
            continue
        row = {"task": task.name, **profile(top[0].as_measure_candidate().sch.mod, target, args.top)}
        rows.append(row)
        print(json.dumps(row))
    if args.out:
        with open(args.out + ".json", "w") as f:
            json.dump(provenance.stamped(rows), f, indent=1)


if __name__ == "__main__":
    main()
