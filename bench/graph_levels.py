"""What the graph-level passes are worth: tasks to tune and untuned latency at each level.

For each model and each level of ``tunewise.graph`` (``none``, ``decompose``, ``fold-bn``): the number of
tasks and of operator calls, the estimated untuned latency (sum of weighted default latencies), the real
latency of the untuned compiled model, and the output check against torch::

    .venv/bin/python bench/graph_levels.py --models resnet18,transformer --out bench/results/graph-levels
"""

from __future__ import annotations

import argparse
import json
import os
import time

from tunewise import compile as compiler
from tunewise import frontend, graph, measure, tasks, tvm_env
from tunewise import target as targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,transformer")
    parser.add_argument("--out", default="bench/results/graph-levels")
    args = parser.parse_args()

    target = targets.resolve(None)
    tvm_env.prepare("llvm")
    measurer = measure.Measurer(target)
    rows = []
    try:
        for name in args.models.split(","):
            imported = frontend.load(name)
            for level in graph.LEVELS:
                start = time.perf_counter()
                model = tasks.extract(imported, target, level=level, measurer=measurer)
                extract_seconds = time.perf_counter() - start
                compiled = compiler.CompiledModel(compiler.build(model), target)
                error = compiler.verify(compiled, model.inputs, model.reference_outputs)
                rows.append({
                    "model": name, "level": level, "tasks": len(model.tasks),
                    "calls": sum(t.weight for t in model.tasks),
                    "untuned_estimate_ms": 1e3 * model.untuned_latency(),
                    "untuned_compiled_ms": 1e3 * compiled.time(*model.inputs, repeat=5, min_repeat_ms=0).median,
                    "max_relative_error": error, "extract_and_measure_seconds": extract_seconds,
                })
                print(json.dumps(rows[-1]), flush=True)
    finally:
        measurer.close()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
