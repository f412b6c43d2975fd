"""Benchmark: three models tuned one after the other against all three at once on a two-node Ray cluster.

::

    .venv/bin/python bench/studies/cluster/cluster.py --store postgresql+psycopg://postgres@127.0.0.1:5432/tunewise_bench

The arms run in turn, the fleet first. Both give every model the same budget (``--trials``), the same
settings and a whole-model check (:mod:`tunewise.tuning.model_checks`) every ``--check-every`` seconds of its tuning:

- ``sequential``: :func:`tunewise.tune` on each model in turn, on the whole machine, each in its own SQLite
  store;
- ``fleet``: :func:`tunewise.tune_many` on a Ray cluster of two nodes started here
  (:class:`ray.cluster_utils.Cluster`, one measurement slot each), rounds of ``--round`` seconds, the
  ``suspension`` policy, all runs in the PostgreSQL store ``--store`` (emptied first: give a database of its
  own).

A model's goal is 1.10 times the best final latency either arm compiled for it. Reported per arm: the wall
time from the arm's start until each model's first check (or its artifact, timed) at or under its goal and
until every model's (``null`` where one never got there), the arm's whole wall time (artifacts written), and
per model its final compiled latency and trials. The wall time of a check is exact in ``sequential`` (a
callback); in ``fleet`` it is placed from the end of the round that made it (the round's wall time less the
tuning seconds left in it). On a machine of fewer cores than nodes the nodes share cores, so the fleet's
measurements share them with the other node's builds: the figures say what the cluster's machinery costs or
gains on one machine, not what two machines give. ``--out`` (default ``bench/results/cluster.json``) holds the
command line, the commit and the CPU model (:mod:`provenance`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import postgres
import provenance

import tunewise
from tunewise.callbacks import Callback
from tunewise.cluster import MEASURE
from tunewise.settings import RunSettings
from tunewise.tuning.session import Budget


class CheckClock(Callback):
    """Notes the wall time of every whole-model check: ``(seconds since origin, tuning seconds, latency)``."""

    def __init__(self, origin: float):
        self.origin, self.points = origin, []

    def model_measured(self, point, snapshot) -> None:
        self.points.append((time.perf_counter() - self.origin, point.elapsed, point.latency))


def sequential(models: list[str], settings: RunSettings, folder: str) -> dict:
    start, runs = time.perf_counter(), {}
    for name in models:
        clock = CheckClock(start)
        result = tunewise.tune(name, budget=settings.budget, seed=settings.seed, check_every=settings.check_every,
                               store=f"sqlite:///{folder}/{name}.db", output=f"{folder}/seq-{name}",
                               callbacks=[clock], progress=False, compare_torch=False)
        checks = [(wall, latency) for wall, _, latency in clock.points]
        checks.append((time.perf_counter() - start, result.tuned_latency))  # the artifact, once it is timed
        runs[name] = {"checks": checks, "final_latency_ms": result.tuned_latency * 1e3, "trials": result.trials}
        print("sequential", name, runs[name]["final_latency_ms"], result.trials, flush=True)
    return {"wall_s": time.perf_counter() - start, "models": runs}


def fleet(models: list[str], settings: RunSettings, store: str, round_seconds: float, folder: str) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from tunewise import stores

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {MEASURE: 1}})
    cluster.add_node(num_cpus=1, resources={MEASURE: 1})
    rounds = []  # (wall at the round's end, {model index: tuning seconds after it})
    start = time.perf_counter()
    try:
        result = tunewise.tune_many(
            models, cluster=cluster.address, store=store, policy="suspension", round_seconds=round_seconds,
            settings=settings, output=f"{folder}/fleet",
            on_round=lambda index, plan, names, outcomes: rounds.append(
                (time.perf_counter() - start, {i: o.elapsed for i, o in outcomes.items()})))
        wall = time.perf_counter() - start
    finally:
        ray.shutdown()
        cluster.shutdown()
    keeper, runs = stores.create(store), {}
    for i, (name, run, tuned) in enumerate(zip(models, result.runs, result.results, strict=True)):
        checks = []
        for point in keeper.get_model_latencies(run):
            ends = [(w, e[i]) for w, e in rounds if i in e and e[i] >= point.elapsed]
            if ends:
                round_wall, round_elapsed = ends[0]
                checks.append((round_wall - (round_elapsed - point.elapsed), point.latency))
        checks.append((wall, tuned.tuned_latency))  # the artifacts, once all are timed
        runs[name] = {"checks": checks, "final_latency_ms": tuned.tuned_latency * 1e3, "trials": tuned.trials}
    keeper.close()
    return {"wall_s": wall, "rounds": len(rounds), "suspensions": result.suspensions,
            "resumptions": result.resumptions, "models": runs}


def reached(checks: list, goal_ms: float) -> float | None:
    """The wall time of the first check at or under ``goal_ms``, or ``None``."""
    return next((wall for wall, latency in checks if latency * 1e3 <= goal_ms), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet18,mobilenetv2,squeezenet1.1")
    parser.add_argument("--trials", type=int, default=200, help="trials per model")
    parser.add_argument("--check-every", type=float, default=60.0)
    parser.add_argument("--round", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store", required=True, help="a PostgreSQL URL of a database for this benchmark alone")
    parser.add_argument("--out", default="bench/results/cluster.json")
    args = parser.parse_args()
    models = args.models.split(",")
    settings = RunSettings(budget=Budget(max_trials=args.trials), check_every=args.check_every,
                           seed=args.seed)
    postgres.empty(args.store)
    with tempfile.TemporaryDirectory() as folder:
        arms = {"fleet": fleet(models, settings, args.store, args.round, folder)}
        arms["sequential"] = sequential(models, settings, folder)
    goals = {name: 1.10 * min(arm["models"][name]["final_latency_ms"] for arm in arms.values()) for name in models}
    for arm in arms.values():
        for name, run in arm["models"].items():
            run["goal_ms"], run["reached_s"] = goals[name], reached(run["checks"], goals[name])
        times = [run["reached_s"] for run in arm["models"].values()]
        arm["all_reached_s"] = None if None in times else max(times)
    results = {"models": models, "trials": args.trials, "check_every_s": args.check_every,
               "round_s": args.round, "seed": args.seed, "nodes": 2, "cores": os.cpu_count(), "arms": arms}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(provenance.stamped(results), f, indent=1)
    for name, arm in arms.items():
        print(name, f"wall {arm['wall_s']:.0f} s, every goal at {arm['all_reached_s']}",
              {m: (round(r["final_latency_ms"], 3), r["reached_s"]) for m, r in arm["models"].items()})


if __name__ == "__main__":
    main()
