"""Benchmark: where a task scheduler loses time against the clairvoyant bound, on recorded traces (no TVM).

::

    .venv/bin/python bench/studies/schedulers/scheduler_losses.py bench/traces/resnet18.json.gz \\
        bench/traces/mobilenetv2.json.gz \\
        bench/traces/transformer.json.gz --out bench/studies/schedulers/results/scheduler-losses.json

Three questions, each answered per trace:

1. **Where the time goes.** Each scheduler (``--schedulers``) is replayed on every seed (16 trials a slot,
   no decision cost) up to the time it comes within 5 % of the best reachable latency. Its time beyond the
   bound's (:func:`tunewise.lab.oracles.fastest_allocation`) is split by what the trials were spent on:
   ``untouched``, the recorded cost of trials on tasks the bound never tunes (their first slots, mostly);
   ``extra``, trials on the other tasks beyond the bound's prefix of them. ``short`` is the cost of the
   bound's trials the scheduler had not spent yet (it reached the goal another way).
2. **Is a task's next slot predictable from its own past?** Over every task run of 128 trials: the mean
   fractional drop of the best latency in a task's ``j``-th slot and the chance it drops at all (more than
   0.1 %), by ``j`` and by how many slots have passed since the task last improved. If a run of slots without
   an improvement predicted fewer improvements, a scheduler could learn plateaus from a task's own curve.
3. **Is what a task needs a property of the task?** The bound's trials per task on one seed, spent on another
   seed: the model latency they reach there over its best reachable. If the tasks that need many trials were
   the same across seeds, this would be close to the 5 % goal.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

import numpy as np

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import schedulers
from tunewise.lab import oracles
from tunewise.lab import replay as rp

GOAL = 0.05
SLOT = 16


def bounds(trace: rp.Trace) -> list[oracles.Allocation]:
    """Per seed, the bound's allocation to the goal (:func:`tunewise.lab.oracles.fastest_allocation`)."""
    return [oracles.fastest_allocation(trace, (1 + GOAL) * trace.best_reachable(s), seed_index=s,
                                       trials_per_slot=SLOT) for s in range(trace.seeds)]


def losses(trace: rp.Trace, name: str, bound_of: list[oracles.Allocation]) -> list[dict]:
    """Per seed: the scheduler's and the bound's seconds to the goal and the split of the difference."""
    out = []
    for seed, bound in enumerate(bound_of):
        goal = (1 + GOAL) * trace.best_reachable(seed)
        run = rp.replay(trace, schedulers.create_seeded(name, seed), seed_index=seed, decision_cost=0.0)
        reached = next(i for i, (_, latency) in enumerate(run.history) if latency <= goal)
        used = [0] * len(trace.tasks)
        for task in run.picks[:reached]:
            used[task] += SLOT
        split = {"untouched": 0.0, "extra": 0.0, "short": 0.0}
        for n, need, task_run in zip(used, bound.trials, trace.runs[seed], strict=True):
            n = min(n, len(task_run.costs))
            if need == 0:
                split["untouched"] += sum(task_run.costs[:n])
            elif n > need:
                split["extra"] += sum(task_run.costs[need:n])
            else:
                split["short"] += sum(task_run.costs[n:need])
        out.append({"seed": seed, "seconds": run.history[reached][0], "bound_seconds": bound.seconds, **split})
    return out


def slot_drops(trace: rp.Trace, trials: int = 128) -> list[tuple[int, int, float]]:
    """``(j, slots since the last improvement, drop in slot j)`` for every slot ``j >= 3`` of every full run."""
    rows = []
    for runs in trace.runs:
        for task, run in zip(trace.tasks, runs, strict=True):
            if len(run.latencies) < trials:
                continue
            best = np.minimum(np.minimum.accumulate(np.array(run.latencies[:trials])), task.default_latency)
            after = best[SLOT - 1::SLOT]
            drops = 1.0 - after[1:] / after[:-1]  # drops[i]: in slot i + 2
            for i in range(1, len(drops)):
                since = next((k for k in range(i) if drops[i - 1 - k] > 1e-3), i)
                rows.append((i + 2, since, float(drops[i])))
    return rows


def drop_table(rows: list[tuple[int, int, float]]) -> list[dict]:
    out = []
    for j in sorted({r[0] for r in rows}):
        for since in sorted({r[1] for r in rows if r[0] == j}):
            drops = [d for jj, s, d in rows if jj == j and s == since]
            if len(drops) >= 5:
                out.append({"slot": j, "since_improvement": since, "n": len(drops), "mean_drop": float(np.mean(drops)),
                            "p_drop": float(np.mean([d > 1e-3 for d in drops]))})
    return out


def transfers(trace: rp.Trace, bound_of: list[oracles.Allocation]) -> list[dict]:
    """The bound's trials per task from seed ``a`` spent on seed ``b``: the latency reached over ``b``'s best."""
    out = []
    for b in range(trace.seeds):
        for a in range(trace.seeds):
            if a == b:
                continue
            latency = sum(t.weight * min(t.default_latency, min(run.latencies[:n], default=math.inf))
                          for t, run, n in zip(trace.tasks, trace.runs[b], bound_of[a].trials, strict=True))
            out.append({"from_seed": a, "on_seed": b, "latency_over_best": latency / trace.best_reachable(b)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--schedulers", default="gradient,expected-gain")
    parser.add_argument("--out", default="bench/results/scheduler-losses.json")
    args = parser.parse_args()
    result = {"provenance": provenance.stamp(), "goal": GOAL, "trials_per_slot": SLOT, "traces": {}}
    rows = []
    for path in args.traces:
        trace = rp.Trace.load(path)
        bound_of = bounds(trace)
        entry = {"losses": {name: losses(trace, name, bound_of) for name in args.schedulers.split(",")},
                 "transfers": transfers(trace, bound_of) if trace.seeds > 1 else []}
        result["traces"][trace.model] = entry
        rows += slot_drops(trace)
        print(trace.model)
        for name, seeds in entry["losses"].items():
            for s in seeds:
                print(f"  {name:16s} seed {s['seed']}: {s['seconds']:6.0f} s, bound {s['bound_seconds']:6.0f} s; "
                      f"untouched {s['untouched']:5.0f} s, extra {s['extra']:5.0f} s, short {s['short']:4.0f} s")
        if entry["transfers"]:
            spread = [t["latency_over_best"] for t in entry["transfers"]]
            print(f"  another seed's bound trials reach {statistics.median(spread):.3f}x the best "
                  f"[{min(spread):.3f}-{max(spread):.3f}]")
    result["slot_drops"] = drop_table(rows)
    print("slot  since-improvement      n  mean drop  P(drop)")
    for r in result["slot_drops"]:
        print(f"{r['slot']:4d}  {r['since_improvement']:17d}  {r['n']:5d}  {r['mean_drop']:9.3f}  {r['p_drop']:7.2f}")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
