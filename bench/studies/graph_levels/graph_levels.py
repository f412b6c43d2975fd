"""What the graph-level passes are worth: tasks to tune, untuned latency, and what tuning reaches at each level.

For each model and each level of ``tunewise.lowering.graph`` (``none``, ``decompose``, ``fold-bn``, ``nhwc``): the
number of tasks and of operator calls, the estimated untuned latency (sum of weighted default latencies), the
real latency of the untuned compiled model, and the output check against torch::

    .venv/bin/python bench/studies/graph_levels/graph_levels.py --models resnet18,transformer \
        --out bench/results/graph-levels

A layout pass changes little untuned; its worth is what the search finds, so with ``--tune-tasks K`` the K heaviest
tasks of each level are also tuned round-robin, ``--trials-per-task`` each, from an empty store for every seed;
reported per task: its best latency and GFLOP/s, and per level the sum of their weighted bests::

    .venv/bin/python bench/studies/graph_levels/graph_levels.py --models resnet18 --levels fold-bn,nhwc --tune-tasks 3 \
        --trials-per-task 32 --seeds 0,1 --out bench/results/resnet18-graph-levels
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import stores
from tunewise import target as targets
from tunewise.delivery import compile as compiler
from tunewise.importing import frontend
from tunewise.job import prepare
from tunewise.lowering import graph, tasks
from tunewise.settings import RunSettings
from tunewise.tuning import session, tvm_env


def tune_heaviest(model, measurer, k: int, trials: int, seed: int, level: str) -> dict:
    """Tune the ``k`` heaviest tasks of ``model`` (extracted at graph level ``level``) round-robin, ``trials``
    each; their bests and weighted sum."""
    model = model.heaviest(k)
    settings = RunSettings(source=model.name, scheduler="round-robin", level=level, seed=seed,
                           budget=session.Budget(max_trials=trials * len(model.tasks), per_task_trials=trials))
    final = prepare.open_session(model, settings, store=stores.create("sqlite://"), measurer=measurer).run()
    pairs = list(zip(model.tasks, final.tasks, strict=True))
    return {
        "seed": seed, "tuning_seconds": final.elapsed,
        "tasks": [{"name": t.name, "weight": t.weight, "flops": t.flops, "default_ms": 1e3 * t.default_latency,
                   "best_ms": 1e3 * s.best, "gflops": s.gflops} for t, s in pairs],
        "weighted_best_ms": 1e3 * sum(t.weight * s.current_latency for t, s in pairs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,transformer")
    parser.add_argument("--levels", default=",".join(graph.LEVELS))
    parser.add_argument("--tune-tasks", type=int, default=0, help="also tune the N heaviest tasks (0: no tuning)")
    parser.add_argument("--trials-per-task", type=int, default=32)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out", default="bench/results/graph-levels")
    args = parser.parse_args()

    target = targets.resolve(None)
    tvm_env.prepare("llvm")
    measurer = prepare.make_measurer(target, RunSettings())
    rows = []
    try:
        for name in args.models.split(","):
            imported = frontend.load(name)
            for level in args.levels.split(","):
                start = time.perf_counter()
                model = tasks.extract(imported, target, level=level, measurer=measurer)
                extract_seconds = time.perf_counter() - start
                compiled, error = compiler.compile_checked(model)
                rows.append({
                    "model": name, "level": level, "tasks": len(model.tasks),
                    "calls": sum(t.weight for t in model.tasks),
                    "untuned_estimate_ms": 1e3 * model.untuned_latency(),
                    "untuned_compiled_ms": 1e3 * compiled.time(*model.inputs, repeat=5, min_repeat_ms=0).median,
                    "max_relative_error": error, "extract_and_measure_seconds": extract_seconds,
                    "tuned": [tune_heaviest(model, measurer, args.tune_tasks, args.trials_per_task, int(seed), level)
                              for seed in args.seeds.split(",")] if args.tune_tasks else [],
                })
                print(json.dumps(rows[-1]), flush=True)
    finally:
        measurer.close()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(provenance.stamped(rows), f, indent=1)


if __name__ == "__main__":
    main()
