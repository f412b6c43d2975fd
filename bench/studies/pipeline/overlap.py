"""Does building candidates while others are measured disturb the timings? Measured, not assumed.

One batch of candidates of one task (proposed by MetaSchedule's evolutionary search) is measured three
times: builds first then runs (A), overlapped (B: each candidate runs as soon as it is built while the rest
build), and builds first again (A'). The noise floor is A vs A'; the cost of overlapping is B vs A::

    .venv/bin/python bench/studies/pipeline/overlap.py --model resnet18 --task 3 --candidates 32 \
        --out bench/results/overlap

Writes ``OUT.json`` with the per-candidate latencies, the relative differences and the wall times.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import target as targets
from tunewise.job import prepare
from tunewise.settings import RunSettings
from tunewise.tuning import tvm_env


def _measure(target, settings, batch):
    measurer = prepare.make_measurer(target, settings)
    try:
        measurer.measure(batch[:2])  # warm the workers up outside the timed part
        start = time.perf_counter()
        results = measurer.measure(batch)
        return [r.latency for r in results], time.perf_counter() - start
    finally:
        measurer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--task", type=int, default=3, help="index of the task to sample candidates from")
    parser.add_argument("--candidates", type=int, default=32)
    parser.add_argument("--out", default="bench/results/overlap")
    args = parser.parse_args()

    from tvm.s_tir import meta_schedule as ms

    target = targets.resolve(None)
    tvm_env.prepare("llvm")
    settings = RunSettings(source=args.model)
    model = prepare.load_model(args.model, settings, target=target)
    task, mod = model.tasks[args.task], model.task_mods[args.task]
    context = ms.TuneContext(mod, target=target, space_generator="post-order-apply", search_strategy="evolutionary",
                             task_name=task.name, rand_state=1, num_threads=targets.num_cores(target)).clone()
    context.pre_tuning(args.candidates, args.candidates, context.generate_design_space(),
                       ms.database.MemoryDatabase(), ms.CostModel.create("random"))
    batch = [(c.sch.mod, c.args_info) for c in context.generate_measure_candidates()]

    overlapping = dataclasses.replace(settings, measure=dataclasses.replace(settings.measure, overlap=True))
    first, first_wall = _measure(target, settings, batch)
    overlapped, overlap_wall = _measure(target, overlapping, batch)
    second, second_wall = _measure(target, settings, batch)

    def rel(a, b):
        return [abs(x - y) / y for x, y in zip(a, b, strict=True) if y != float("inf") and x != float("inf")]

    noise, cost = rel(second, first), rel(overlapped, first)
    bias = [x / y - 1 for x, y in zip(overlapped, first, strict=True) if y != float("inf") and x != float("inf")]
    summary = {
        "task": task.name, "candidates": len(batch),
        "median_rel_diff_noise_floor": statistics.median(noise),
        "median_rel_diff_overlap": statistics.median(cost),
        "median_signed_diff_overlap": statistics.median(bias),
        "wall_seconds": {"sequential": first_wall, "overlap": overlap_wall, "sequential_again": second_wall},
    }
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(provenance.stamped({**summary, "latencies": {"sequential": first, "overlap": overlapped,
                                                               "sequential_again": second}}), f, indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
