"""Whether re-ranking each task's top records by their time inside the compiled model beats the warm ranking.

::

    .venv/bin/python bench/studies/estimate/rerank_in_model.py --store sqlite:///STORE.db --run 1 --top 4 \\
        --out bench/studies/estimate/results/rerank-in-model-resnet18.json

Takes a finished run. For rank ``r`` in ``0 .. top-1`` it compiles the model with every task's ``r``-th best
record (warm, as tuning ranks them; a task with fewer records keeps its last) and times each kernel inside it
(the VM's instrument hook, ``bench/studies/estimate/estimate_gap.py``). Each task then gets the rank whose kernel was
fastest in its model, and that model and the top-1 model (what ``tunewise`` compiles) are timed in turn, ``--rounds``
rounds each, in this one process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance
from estimate_gap import in_model, kernel_name
from stored_run import open_run

from tunewise.delivery import compile as compiler


def chosen(model, tops: list[list], ranks: list[int]):
    """A database holding, per task, its record of rank ``ranks[task]`` (its last, when it has fewer)."""
    return compiler.records_database(model, [records[min(rank, len(records) - 1)] if records else None
                                             for records, rank in zip(tops, ranks, strict=True)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--top", type=int, default=4)
    parser.add_argument("--calls", type=int, default=30, help="instrumented model calls a rank")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of timing the two models in turn")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    run = open_run(args.store, args.run)
    model = run.model
    tops = compiler.faster_records(model, run.database, args.top)

    kernel = [[None] * args.top for _ in model.tasks]  # seconds a call of the task's kernel, by rank
    for rank in range(args.top):
        compiled, _ = compiler.compile_checked(model, chosen(model, tops, [rank] * len(model.tasks)))
        calls, _, _ = in_model(compiled, model.inputs, args.calls, rounds=1, loops=False)
        for i, task in enumerate(model.tasks):
            name = kernel_name(calls, task.name)
            if rank < len(tops[i]) and name is not None:
                kernel[i][rank] = calls[name] / task.weight
    ranks = [min((t, r) for r, t in enumerate(times) if t is not None)[1] if any(t is not None for t in times) else 0
             for times in kernel]
    models = {"top-1": compiler.compile_checked(model, chosen(model, tops, [0] * len(model.tasks)))[0],
              "re-ranked": compiler.compile_checked(model, chosen(model, tops, ranks))[0]}
    timed = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, compiled in models.items():
            timed[name].append(compiled.time(*model.inputs, repeat=10).median)
    tasks = [{"name": task.name, "weight": task.weight,
              "warm": [compiler.record_latency(r) for r in records],
              "in_model": times, "rank": rank}
             for task, records, times, rank in zip(model.tasks, tops, kernel, ranks, strict=True) if records]
    result = {"store": args.store, "run": args.run, "model": model.name, "top": args.top, "tasks": tasks,
              "rounds": timed, "median": {name: statistics.median(t) for name, t in timed.items()},
              "changed": sum(rank != 0 for rank in ranks)}
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)
    print(f"{result['changed']} of {len(tasks)} tasks re-ranked; median of {args.rounds} rounds: "
          + ", ".join(f"{name} {1e3 * m:.2f} ms" for name, m in result["median"].items()))


if __name__ == "__main__":
    main()
