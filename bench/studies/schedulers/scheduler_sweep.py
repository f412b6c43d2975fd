"""Benchmark: how near the clairvoyant bound a scheduler without foresight gets, its settings chosen in hindsight
(no TVM).

::

    .venv/bin/python bench/studies/schedulers/scheduler_sweep.py --kept-out grouped,tcn \
        --out bench/studies/schedulers/results/scheduler-sweep.json

Every trace of ``bench/traces/`` (or those named) is replayed (:func:`tunewise.lab.replay.replay`, 16 trials a slot,
the decision time charged) with ``gradient``, ``gated-gradient`` and ``expected-gain`` at its defaults, and with
``expected-gain`` varied one setting at a time: its learning curve's ``exponent`` and the throughput quantile
that sets an untried task's expected gain (``reference_quantile``), and a *lookahead* index that scores a tried
task by the best expected gain per second over its next 1 to ``K`` slots rather than the next one (a task's
first and fifth slots cost about three times its others, so the next slot alone can undersell a task). For
each trace the table gives each variant's median time to within 5 % of the best reachable latency over the
bound's median (:func:`tunewise.lab.oracles.fastest_allocation`), and the geometric mean over the
development traces and over the traces kept out (``--kept-out``, file names without ``.json.gz``). A variant
picked as the best of the sweep on the very traces it is judged on is an optimistic figure for a scheduler
without foresight: what no setting of these rules reaches, they do not reach.
"""

from __future__ import annotations

import argparse
import glob
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
from tunewise.schedulers import ExpectedGain
from tunewise.tuning.ledger import slot_size

GOAL = 0.05


class Lookahead(ExpectedGain):
    """``expected-gain`` scoring a tried task by the best expected gain per second over its next 1 to ``slots``
    slots, each slot's gain from the one learning curve and its cost from the position means."""

    def __init__(self, *, slots: int, **kwargs):
        super().__init__(**kwargs)
        self.slots = slots

    def rates(self, snapshot):
        durations = snapshot.slot_seconds()
        spent = [s for task in durations for s in task]
        if not spent or not sum(spent) > 0:
            return super().rates(snapshot)
        mean = sum(spent) / len(spent)
        at = [float(np.mean([d[j] for d in durations if len(d) > j])) for j in range(max(map(len, durations)))]
        first = self.slot_seconds(snapshot)
        out = {}
        for task in snapshot.live:
            own = durations[task.index]
            if task.slots == 0 or not math.isfinite(task.current_latency) or task.trials <= 0:
                out[task.index] = self.expected_gain(snapshot, task) / first[task.index]
                continue
            factor = first[task.index] / (at[len(own)] if len(own) < len(at) else mean)
            n, m = task.trials, slot_size(snapshot, task)
            cost, best = 0.0, 0.0
            for k in range(1, self.slots + 1):
                j = len(own) + k - 1
                cost += (at[j] if j < len(at) else mean) * factor
                gain = task.weight * task.current_latency * (1.0 - (n / (n + k * m)) ** self.exponent)
                best = max(best, gain / cost)
            out[task.index] = best
        return out


def variants() -> dict:
    """Each variant's name and a maker of its scheduler for a seed."""
    out = {name: (lambda seed, name=name: schedulers.create_seeded(name, seed))
           for name in ("gradient", "gated-gradient", "expected-gain")}
    out.update({f"exponent {e}": (lambda seed, e=e: ExpectedGain(exponent=e)) for e in (0.05, 0.1, 0.25, 0.4)})
    out.update({f"quantile {q}": (lambda seed, q=q: ExpectedGain(reference_quantile=q)) for q in (0.5, 0.9)})
    out.update({f"lookahead {k}": (lambda seed, k=k: Lookahead(slots=k)) for k in (2, 4, 8)})
    return out


def bound_seconds(trace: rp.Trace) -> float:
    """The bound's median time to within :data:`GOAL` over the trace's seeds."""
    return statistics.median(
        oracles.fastest_allocation(trace, (1 + GOAL) * trace.best_reachable(seed), seed_index=seed).seconds
        for seed in range(trace.seeds))


def median_seconds(trace: rp.Trace, make) -> float:
    """The variant's median time to within :data:`GOAL` over the trace's seeds (``inf`` where not reached)."""
    times = []
    for seed in range(trace.seeds):
        run = rp.replay(trace, make(seed), seed_index=seed)
        reached = rp.time_to_within(run.history, trace.best_reachable(seed), GOAL)
        times.append(math.inf if reached is None else reached)
    return statistics.median(times)


def geomean(values) -> float:
    values = list(values)
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", help="default: every bench/traces/*.json.gz")
    parser.add_argument("--kept-out", default="grouped,tcn", help="the traces kept out of development")
    parser.add_argument("--out", default="bench/results/scheduler-sweep.json")
    args = parser.parse_args()
    paths = args.traces or sorted(glob.glob(os.path.join("bench", "traces", "*.json.gz")))
    kept_out = set(args.kept_out.split(",")) if args.kept_out else set()
    makers = variants()
    ratios: dict[str, dict[str, float]] = {}
    for path in paths:
        trace = rp.Trace.load(path)
        name = os.path.basename(path).removesuffix(".json.gz")
        bound = bound_seconds(trace)
        ratios[name] = {variant: median_seconds(trace, make) / bound for variant, make in makers.items()}
        print(f"{name:26s} " + " ".join(f"{r:6.2f}" for r in ratios[name].values()), flush=True)
    groups = {"development": [m for m in ratios if m not in kept_out], "kept out": [m for m in ratios if m in kept_out]}
    summary = {group: {name: geomean(ratios[m][name] for m in models) for name in makers}
               for group, models in groups.items() if models}
    for group, row in summary.items():
        print(f"{'geomean, ' + group:26s} " + " ".join(f"{r:6.2f}" for r in row.values()))
    print(f"{'':26s} " + " ".join(f"{name[:6]:>6s}" for name in makers))
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"provenance": provenance.stamp(), "goal": GOAL, "traces": paths, "groups": groups,
                   "over_bound": ratios, "geomean": summary}, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
