"""Benchmark: every task scheduler's model-latency estimate after short tuning budgets, replayed on the
recorded traces (no TVM, seconds of CPU).

::

    .venv/bin/python bench/studies/schedulers/short_budgets.py --out bench/results/short-budgets.json

For each trace (ResNet-18, MobileNetV2, Transformer by default), scheduler and recorded seed,
:func:`tunewise.lab.replay.replay` simulates the session (16 trials per slot, the scheduler's seed = the seed
index, decision time measured and charged) up to the largest budget. The estimate at a budget ``B`` is the
model latency after the last slot that ended by ``B`` (a slot that would end later does not count, as the
session does not start one that cannot finish), divided by the best reachable latency of that seed (each
task at its best recorded trial): 1.00 is the best, lower is better. The table gives the median over seeds
per trace and budget, and the geometric mean of those medians over the traces per budget; the scheduler with
the lowest geometric mean at the shortest budget, and at the longest, are named. ``sequential`` gets a
per-task budget of ``ceil(recorded trials / tasks)``, as in ``bench/studies/schedulers/replay.py``. The JSON holds the
command line, the commit, the CPU model (:mod:`provenance`), the per-seed estimates and the table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import schedulers
from tunewise.budget import Budget
from tunewise.lab import replay as rp

TRACES = ["bench/traces/resnet18.json.gz", "bench/traces/mobilenetv2.json.gz", "bench/traces/transformer.json.gz"]
BUDGETS = (180.0, 600.0)


def estimate_at(history, budget: float) -> float:
    """The model latency in ``history`` (``(elapsed, latency)`` pairs in time order) at ``budget`` seconds."""
    return [latency for t, latency in history if t <= budget][-1]


def run_trace(trace: rp.Trace, names: list[str], budgets: tuple[float, ...], trials_per_slot: int) -> dict:
    recorded = sum(len(r.latencies) for r in trace.runs[0])
    out = {}
    for name in names:
        per_task = math.ceil(recorded / len(trace.tasks)) if name == "sequential" else None
        seeds = []
        for seed in range(trace.seeds):
            run = rp.replay(trace, schedulers.create_seeded(name, seed), seed_index=seed,
                            trials_per_slot=trials_per_slot, budget=Budget(time_budget=max(budgets),
                                                                           per_task_trials=per_task))
            best = trace.best_reachable(seed)
            seeds.append({"seed": seed, "first_picks": list(run.picks[:5]),
                          **{f"{b:.0f}s": estimate_at(run.history, b) / best for b in budgets}})
        out[name] = {"seeds": seeds, **{f"{b:.0f}s": statistics.median(s[f"{b:.0f}s"] for s in seeds)
                                         for b in budgets}}
    return out


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def table(results: dict, names: list[str], budgets: tuple[float, ...]) -> tuple[str, dict]:
    keys = [f"{b:.0f}s" for b in budgets]
    models = list(results)
    head = f"{'scheduler':18s} " + " ".join(f"{m[:11] + ' ' + k:>18s}" for k in keys for m in models) + " " + \
        " ".join(f"{'geomean ' + k:>13s}" for k in keys)
    lines = [head, "-" * len(head)]
    means = {}
    for name in names:
        means[name] = {k: geometric_mean([results[m][name][k] for m in models]) for k in keys}
        lines.append(f"{name:18s} " + " ".join(f"{results[m][name][k]:18.3f}" for k in keys for m in models)
                     + " " + " ".join(f"{means[name][k]:13.3f}" for k in keys))
    return "\n".join(lines), means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", default=TRACES)
    parser.add_argument("--schedulers", default=",".join(schedulers.names()))
    parser.add_argument("--budgets", default=",".join(f"{b:.0f}" for b in BUDGETS), help="seconds, comma-separated")
    parser.add_argument("--trials-per-slot", type=int, default=16)
    parser.add_argument("--out", default="bench/results/short-budgets.json")
    args = parser.parse_args()

    import scipy.optimize  # noqa: F401  (the belief's import, paid once, not by whichever DynaTune runs first)

    names = args.schedulers.split(",")
    budgets = tuple(float(b) for b in args.budgets.split(","))
    results = {}
    for path in args.traces:
        trace = rp.Trace.load(path)
        results[trace.model] = run_trace(trace, names, budgets, args.trials_per_slot)
        print(f"{trace.model}: done", flush=True)
    text, means = table(results, names, budgets)
    best = {k: min(means, key=lambda n: means[n][k]) for k in next(iter(means.values()))}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"provenance": provenance.stamp(), "traces": args.traces, "budgets_s": list(budgets),
                   "trials_per_slot": args.trials_per_slot, "metric": "model latency / best reachable, median "
                   "over seeds; geomean over traces", "geomean": means, "lowest_geomean": best,
                   "results": results, "table": text}, f, indent=1)
    print(text)
    print("lowest geometric mean: " + ", ".join(f"{k}: {n}" for k, n in best.items()))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
