"""Benchmark: Trimmer's methods against our other schedulers, by the energy and time to reach a common goal.

::

    .venv/bin/python bench/studies/cold_filter/trimmer.py --models resnet18,mobilenetv2 --seeds 0,1 --minutes 20

Per model, one import, one extraction and one measurement of the default latencies; then, per seed, four
arms tune from an empty store, side by side in this invocation, all with the adaptive evaluator, each for
``--minutes`` of tuning time with a whole-model check (:mod:`tunewise.tuning.model_checks`: compiled, verified, timed
in a
fresh process) every ``--check-every`` seconds and once more at the end:

- ``gradient`` and ``dynatune`` (our schedulers),
- ``survey`` (Trimmer's survey tuning: every live task a batch per epoch, a task retired after 3 batches
  without improvement),
- ``survey+cold`` (the same with the cold-candidate filter, :class:`tunewise.filters.ColdFilter`).

A check is timed in a fresh process of its own, and on a shared host the same compiled model times 10-50 %
apart from one process to the next (``bench/studies/checks/check_noise.py``): too much to rank arms whose models differ
by a few percent. So once all runs of a model are made, the benchmark times them again side by side. Each run's
SQLite store is kept under ``--work``; every ``--cut-every`` seconds of each run's tuning time, and at its end,
the model is compiled from the trials measured up to that moment (each task's best record applied if it beats
the task's default latency, as a check does), checked against the reference outputs, and all these models
of all runs are timed in alternating rounds in one fresh process (:func:`tunewise.delivery.timing.time_models`), so
that whatever slows the host slows them all alike.

The goal of a model is 1.10 times the best final side-by-side latency of any of its runs in this invocation.
Per run: ``time_to_goal_s`` and ``energy_to_goal_j`` (tuning time and joules, the run's own checks included,
at the first cut whose side-by-side latency is at or under the goal; ``null`` when none is),
``final_latency_ms`` (its end, side by side), ``checks`` (the run's own checks: tuning time, joules so far,
latency), ``cold_share`` and
``failed_share`` (of the run's measurements: cold by :func:`tunewise.filters.cold_flags` over each task's
sequence, failed by the store), ``skipped`` (proposals the filter skipped) and ``energy_estimated`` (true when
the meter is the CPU-time estimate). Per model and arm, the medians over seeds. ``--out`` (default
``bench/results/trimmer.json``) holds them with the command line, the commit and the CPU model
(:mod:`provenance`), and each run its own; it is written after every run, and ``--resume`` makes only the runs
it does not hold yet, so the benchmark can be run a few models or seeds at a time. Each model records its
CPU target, and runs of a model are made on one machine only (the goal compares them): resuming a model
on another target is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share
sys.path.insert(0, os.path.join(BENCH, "studies", "checks"))  # check_noise

import provenance
from check_noise import compile_cut, cut_moments

from tunewise import stores
from tunewise import target as targets
from tunewise.delivery import timing
from tunewise.filters import cold_flags
from tunewise.job import prepare
from tunewise.settings import RunSettings
from tunewise.tuning.session import Budget

ARMS = {"gradient": {"scheduler": "gradient"}, "dynatune": {"scheduler": "dynatune"},
        "survey": {"scheduler": "survey"}, "survey+cold": {"scheduler": "survey", "candidate_filter": "cold"}}


def spent_joules(store, run: int) -> list[tuple[float, float]]:
    """``(tuning time, joules spent so far)`` after each slot and each check of a run."""
    moments = sorted([(c.elapsed, c.joules or 0.0) for c in store.get_checkpoints(run)]
                     + [(p.elapsed, p.joules or 0.0) for p in store.get_model_latencies(run)])
    spent, cumulative = 0.0, []
    for elapsed, joules in moments:
        spent += joules
        cumulative.append((elapsed, spent))
    return cumulative


def joules_at(cumulative: list[tuple[float, float]], elapsed: float) -> float:
    return max((j for e, j in cumulative if e <= elapsed + 1e-9), default=0.0)


def tune(model, settings: RunSettings, measurer, path: str) -> dict:
    """One run of ``model`` into a new SQLite store at ``path``: its own checks ``(elapsed, joules so far,
    latency)``, its final check's latency, the shares of cold and failed measurements."""
    if os.path.exists(path):
        os.remove(path)
    store = stores.create(f"sqlite:///{path}")
    loop = prepare.open_session(model, settings, store=store, measurer=measurer)
    loop.run()
    loop.check_model()  # the final latency
    run, points = loop.run_id, store.get_model_latencies(loop.run_id)
    cumulative = spent_joules(store, run)
    trials = store.get_trials(run, records=False)
    by_task: dict[int, list[float]] = {}
    for t in trials:
        by_task.setdefault(t.task, []).append(t.latency)
    cold = sum(sum(f and math.isfinite(x) for f, x in zip(cold_flags(xs), xs, strict=True)) for xs in by_task.values())
    return {"store": path, "checks": [(p.elapsed, joules_at(cumulative, p.elapsed), p.latency * 1e3) for p in points],
            "own_final_latency_ms": points[-1].latency * 1e3, "trials": len(trials),
            "cold_share": cold / len(trials) if trials else 0.0,
            "failed_share": sum(t.error is not None for t in trials) / len(trials) if trials else 0.0,
            "skipped": sum(c.skipped for c in store.get_checkpoints(run)),
            "energy_estimated": loop.meter.read().estimated}


def side_by_side(model, runs: dict, cut_every: float) -> dict:
    """Every run of ``runs`` (``{arm: {seed: run}}``, their stores kept) cut every ``cut_every`` seconds of its
    tuning time and at its end, each cut compiled and verified, all timed together in one fresh process. Sets
    each run's ``cuts``: ``(tuning time, joules so far, latency in ms)``."""
    cuts, compiled = [], []
    for by_seed in runs.values():
        for run in by_seed.values():
            store = stores.create(f"sqlite:///{run['store']}", read_only=True)
            [spec] = store.get_runs()
            trials, checkpoints = store.get_trials(spec.id), store.get_checkpoints(spec.id)
            tuned = model.with_default_latencies(t.default_latency for t in store.get_tasks(spec.id))
            cumulative, run["cuts"] = spent_joules(store, spec.id), []
            for moment, slot in cut_moments(checkpoints, cut_every):
                compiled.append(compile_cut(tuned, store, trials, slot)[0])
                run["cuts"].append([moment, joules_at(cumulative, moment)])
                cuts.append(run["cuts"][-1])
            print(f"{spec.scheduler} {run['store']}: {len(run['cuts'])} cuts compiled", flush=True)
    latencies, rounds = timing.time_models(compiled, model.inputs)
    for cut, latency in zip(cuts, latencies, strict=True):
        cut.append(latency * 1e3)
    return {"cut_every_s": cut_every, "rounds": rounds, "models": len(compiled), "provenance": provenance.stamp()}


def to_goal(run: dict, goal_ms: float) -> tuple[float | None, float | None]:
    for elapsed, joules, latency in run["cuts"]:
        if latency <= goal_ms:
            return elapsed, joules
    return None, None


def summarise(runs: dict) -> tuple[float, dict]:
    """The common goal of a model's runs (``{arm: {seed: run}}``, timed side by side), each run's time and
    energy to it, and per arm the medians over seeds (``None`` where a seed's run has not reached the goal)."""
    for by_seed in runs.values():
        for r in by_seed.values():
            r["final_latency_ms"] = r["cuts"][-1][2]
    goal = 1.10 * min(r["final_latency_ms"] for arm in runs.values() for r in arm.values())
    summary = {}
    for arm, by_seed in runs.items():
        for r in by_seed.values():
            r["time_to_goal_s"], r["energy_to_goal_j"] = to_goal(r, goal)

        def median(key, by_seed=by_seed):
            values = [r[key] for r in by_seed.values() if r[key] is not None]
            return statistics.median(values) if len(values) == len(by_seed) else None

        summary[arm] = {key: median(key) for key in ("time_to_goal_s", "energy_to_goal_j", "final_latency_ms",
                                                     "own_final_latency_ms", "cold_share", "failed_share", "skipped")}
        summary[arm]["energy_estimated"] = any(r["energy_estimated"] for r in by_seed.values())
        summary[arm]["seeds"] = sorted(by_seed)
    return goal, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet18,mobilenetv2")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--check-every", type=float, default=120.0)
    parser.add_argument("--cut-every", type=float, default=60.0,
                        help="seconds of tuning time between two cuts of a run timed side by side")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--work", default="/tmp/tunewise-trimmer", help="where each run's SQLite store is kept")
    parser.add_argument("--out", default="bench/results/trimmer.json")
    parser.add_argument("--resume", action="store_true",
                        help="keep the runs --out holds (made with the same --minutes and --check-every, their "
                             "stores still under --work) and make only the missing ones; a model whose runs were "
                             "timed side by side at another --cut-every is timed again")
    args = parser.parse_args()
    target = targets.resolve(None)
    results = {"minutes": args.minutes, "check_every_s": args.check_every, "models": {}}
    os.makedirs(args.work, exist_ok=True)
    if args.resume and os.path.exists(args.out):
        with open(args.out) as f:
            kept = json.load(f)
        if (kept["minutes"], kept["check_every_s"]) != (args.minutes, args.check_every):
            raise SystemExit(f"{args.out} was made with other --minutes or --check-every")
        for name, model in kept["models"].items():
            if name in args.models.split(",") and model["target"] != str(target):
                raise SystemExit(f"{args.out} holds runs of {name} made on {model['target']}: a model's runs compare "
                                 f"only on one machine (give another --out, or leave {name} out)")
            results["models"][name] = {"target": model["target"], "cpu": model["cpu"],
                                       "runs": {arm: {int(seed): run for seed, run in by_seed.items()}
                                                for arm, by_seed in model["runs"].items()},
                                       **({"side_by_side": model["side_by_side"]} if "side_by_side" in model else {})}

    def save() -> None:
        for entry in results["models"].values():
            if all("cuts" in run for by_seed in entry["runs"].values() for run in by_seed.values()):
                entry["goal_ms"], entry["summary"] = summarise(entry["runs"])
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(provenance.stamped(results), f, indent=1)

    for name in args.models.split(","):
        entry = {"target": str(target), "cpu": provenance.cpu_model(), "runs": {}}
        runs = results["models"].setdefault(name, entry)["runs"]
        todo = [(seed, arm) for seed in (int(s) for s in args.seeds.split(",")) for arm in args.arms.split(",")
                if seed not in runs.get(arm, {})]
        timed = results["models"][name].get("side_by_side", {})
        if not todo and timed.get("cut_every_s") == args.cut_every:
            continue
        base = RunSettings(source=name, budget=Budget(time_budget=60 * args.minutes), check_every=args.check_every,
                           energy_meter="auto")
        measurer = prepare.make_measurer(target, base)
        try:
            model = prepare.load_model(name, base, target=target, measurer=measurer)
            for seed, arm in todo:
                settings = dataclasses.replace(base, seed=seed, **ARMS[arm])
                run = tune(model, settings, measurer, os.path.join(args.work, f"{name}-{arm}-{seed}.db"))
                run["provenance"] = provenance.stamp()
                runs.setdefault(arm, {})[seed] = run
                print(name, arm, seed, {k: v for k, v in run.items() if k not in ("checks", "provenance")},
                      flush=True)
                save()  # every run is kept as soon as it is made: an invocation cut short loses only its last
            results["models"][name]["side_by_side"] = side_by_side(model, runs, args.cut_every)
            save()
        finally:
            measurer.close()
        print(name, json.dumps(results["models"][name]["summary"], indent=1), flush=True)


if __name__ == "__main__":
    main()
