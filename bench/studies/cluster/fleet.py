"""Benchmark: a fleet of models tuned on 1 to 256 workers, simulated from the recorded traces (no TVM, seconds
of CPU): when every model reaches its goal, with and without Trimmer's suspension, and the load on the
shared store.

::

    .venv/bin/python bench/studies/cluster/fleet.py --out bench/results/fleet-simulation.json

The fleet is ``--models`` models taken in turn from the traces (ResNet-18, MobileNetV2, Transformer) and
their recorded seeds, each tuned by its own ``gradient`` task scheduler until its estimate comes within
``--within`` of the best reachable latency of its seed (:func:`tunewise.lab.fleet.fleet_of`). For each
worker count (1, 2, 4, ... ``--max-workers``) and population policy (``fair``: equal shares, ``suspension``:
Trimmer's), :func:`tunewise.lab.fleet.simulate` reports the time until every model reached its goal, the
mean time for a model to reach it, the workers' utilisation, the suspensions, the policy's decision time per
round, the store's load (busy seconds per second, at the commit and read costs measured in
``bench/results/store-overhead.json``), and the fleet's latency over goal (geometric mean) at a quarter and half of the
time ``fair`` took on as many workers (:meth:`tunewise.lab.fleet.FleetRun.gap_at`: what suspension buys when
tuning stops before every goal is reached). The JSON holds the command line, the commit and the CPU model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise.lab.fleet import doubling, fleet_of, simulate
from tunewise.lab.replay import Trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", default="bench/traces/resnet18.json.gz,bench/traces/mobilenetv2.json.gz,"
                                            "bench/traces/transformer.json.gz")
    parser.add_argument("--models", type=int, default=48)
    parser.add_argument("--within", type=float, default=0.10)
    parser.add_argument("--max-workers", type=int, default=256)
    parser.add_argument("--round-seconds", type=float, default=60.0)
    parser.add_argument("--out", default="bench/results/fleet-simulation.json")
    args = parser.parse_args()
    fleet = fleet_of([Trace.load(path) for path in args.traces.split(",")], args.models, within=args.within)
    rows = []
    print(f"{'workers':>7} {'policy':>10} {'all goals s':>11} {'mean s':>8} {'busy':>6} {'susp.':>6} "
          f"{'policy ms/round':>15} {'store load':>10} {'gap 1/4':>7} {'gap 1/2':>7}")
    for workers in doubling(args.max_workers):
        fair_wall = None
        for policy in ("fair", "suspension"):
            run = simulate(fleet, policy, workers=workers, round_seconds=args.round_seconds)
            fair_wall = fair_wall or run.wall
            row = {"workers": workers, "policy": policy, "all_reached_s": run.all_reached,
                   "mean_reached_s": run.mean_reached, "wall_s": run.wall, "utilisation": run.utilisation,
                   "suspensions": run.suspensions, "resumptions": run.resumptions, "rounds": run.rounds,
                   "trials": run.trials, "policy_ms_per_round": 1e3 * run.policy_seconds / run.rounds,
                   "store_load": run.store_load, "gap_at_quarter": run.gap_at(fair_wall / 4),
                   "gap_at_half": run.gap_at(fair_wall / 2)}
            rows.append(row)
            print(f"{workers:>7} {policy:>10} {run.all_reached or float('nan'):>11.0f} "
                  f"{run.mean_reached or float('nan'):>8.0f} {run.utilisation:>6.2f} {run.suspensions:>6} "
                  f"{row['policy_ms_per_round']:>15.3f} {run.store_load:>10.4f} {row['gap_at_quarter']:>7.3f} "
                  f"{row['gap_at_half']:>7.3f}", flush=True)
    result = {"traces": args.traces.split(","), "models": args.models, "within": args.within,
              "round_seconds": args.round_seconds, "scheduler": "gradient", "rows": rows}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(result), f, indent=1)


if __name__ == "__main__":
    main()
