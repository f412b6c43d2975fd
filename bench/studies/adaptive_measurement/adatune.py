"""Benchmark: AdaTune's adaptive evaluator and RFEI cost model against MetaSchedule's fixed evaluator and XGBoost.

Run by hand, never in CI (hours on 2 cores)::

    .venv/bin/python bench/studies/adaptive_measurement/adatune.py --models resnet18,transformer \\
        --trials-per-task 64 --seeds 0,1,2 \\
        --out bench/results/adatune

Per model: one import, one task extraction and one measurement of the default latencies; then, for every seed,
each arm tunes from an empty in-memory store with the same trial budget (AdaTune, Li et al., NeurIPS 2020;
``papers/adatune-review-answers.txt``):

(a) **evaluators**: round-robin over the tasks, ``--trials-per-task`` each, XGBoost, the fixed evaluator
    against the adaptive one. Reported: measurement seconds per trial (the runner's wall time per candidate),
    samples per trial, and each task's best schedule re-measured with a long fixed evaluation (``LONG``), so
    both arms are judged by the same yardstick.
(b) **cost models**: the same loop with the fixed evaluator, XGBoost against RFEI. Reported per task: the
    trials and the task's tuning seconds (its slots: search, measurement, model update) until its best is
    within 5 % of the task's best known latency (the least any (b) run of the model measured).
(c) **together**, model level: the ``gradient`` scheduler over ``trials-per-task x tasks`` trials,
    (fixed, XGBoost) against (adaptive, RFEI). Reported: the model-latency estimate from the re-measured best
    of each task, tuning seconds, seconds until the estimate is within 5 % of the best final one of the model's
    (c) runs, and how the slot time splits between search and measurement (AdaTune's 28 : 72 -> 44 : 56).

The adaptive evaluator stops clearly slow candidates early only when the session passes each task's best
latency to ``Measurer.measure(..., reference=...)``. Summaries give the median over seeds with the min and max.
Writes ``OUT.json`` (every run and the summaries) and ``OUT.png``.
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

import provenance

from tunewise import callbacks, infinity, stores
from tunewise import target as targets
from tunewise.job import prepare
from tunewise.lowering import tasks
from tunewise.settings import RunSettings
from tunewise.tuning import measure, session, tvm_env

LONG = measure.MeasureConfig(number=10, repeat=10, min_repeat_ms=200)
WITHIN = 1.05


def tune(model, measurer, settings: RunSettings) -> dict:
    """One tuning run from an empty store (``measurer`` measures with the settings' evaluator); per-slot and
    per-trial facts plus each task's best schedule."""
    log = callbacks.SlotLog()
    run = prepare.open_session(model, settings, store=stores.create("sqlite://"), measurer=measurer, callbacks=[log])
    final = run.run()
    events = log.events
    seconds = {e.slot: e.seconds for e in events}
    return {
        "trials": [{"task": t.task, "slot": t.slot, "latency": t.latency, "samples": len(t.run_secs),
                    "run_seconds": t.run_seconds, "slot_seconds": seconds.get(t.slot, 0.0)} for t in run.trials],
        "slots": [{"slot": e.slot, "task": e.task, "seconds": e.seconds, "search": e.search_seconds,
                   "measure": e.measure_seconds} for e in events],
        "curve": [list(p) for p in run.history], "tuning_seconds": final.elapsed,
        "estimate": final.estimated_latency(), "database": run.database,
    }


def remeasure(model, database, long_measurer) -> list[float]:
    """Each task's best schedule in ``database`` timed with the long fixed evaluation (``inf``: no record)."""
    latencies = []
    for mod in model.task_mods:
        sch = database.query_schedule(mod, target=model.target, workload_name="main")
        if sch is None:
            latencies.append(math.inf)
            continue
        latencies.append(long_measurer.measure([(sch.mod, tasks.args_info(sch.mod))])[0].latency)
    return latencies


def reach(run: dict, task: int, goal: float) -> tuple[int | None, float | None]:
    """Trials of ``task`` and its tuning seconds until its best is ``<= goal`` (``None``: never)."""
    done, seconds, slot = 0, 0.0, None
    for t in (t for t in run["trials"] if t["task"] == task):
        if t["slot"] != slot:
            slot, seconds = t["slot"], seconds + t["slot_seconds"]
        done += 1
        if t["latency"] <= goal:
            return done, seconds
    return None, None


def share(run: dict, part: str) -> float:
    """The share of the slots' time spent in ``part`` (``"search"`` or ``"measure"``)."""
    return sum(s[part] for s in run["slots"]) / sum(s["seconds"] for s in run["slots"])


def spread(values) -> dict:
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def geomean(values) -> float:
    values = [v for v in values if math.isfinite(v) and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


def bench_model(name: str, args, target, measurers: dict, long_measurer) -> dict:
    model = prepare.load_model(name, RunSettings(level=args.level), target=target, measurer=measurers["fixed"])
    if args.max_tasks:
        model = model.heaviest(args.max_tasks)
    n = args.trials_per_task
    per_task = session.Budget(max_trials=n * len(model.tasks), per_task_trials=n)
    whole = session.Budget(max_trials=n * len(model.tasks))
    arms = {  # part -> arm -> (evaluator, cost model, scheduler, budget)
        "a": {"fixed": ("fixed", "xgb", "round-robin", per_task),
              "adaptive": ("adaptive", "xgb", "round-robin", per_task)},
        "b": {"xgb": ("fixed", "xgb", "round-robin", per_task), "rfei": ("fixed", "rfei", "round-robin", per_task)},
        "c": {"baseline": ("fixed", "xgb", "gradient", whole), "adatune": ("adaptive", "rfei", "gradient", whole)},
    }
    parts = {part: {arm: [] for arm in runs} for part, runs in arms.items() if part in args.parts}
    for seed in args.seeds:
        done = {}  # (a) fixed and (b) xgb are the same arm: tuned once per seed
        for part in parts:
            for arm, config in arms[part].items():
                if config not in done:
                    evaluator, cost_model, scheduler, budget = config
                    settings = RunSettings(source=name, level=args.level, evaluator=evaluator, cost_model=cost_model,
                                           scheduler=scheduler, budget=budget, seed=seed)
                    run = tune(model, measurers[evaluator], settings)
                    database = run.pop("database")
                    run["remeasured"] = remeasure(model, database, long_measurer)
                    run["remeasured_estimate"] = sum(t.weight * min(x, t.default_latency)
                                                     for t, x in zip(model.tasks, run["remeasured"], strict=True))
                    run["seed"] = seed
                    done[config] = run
                    print(name, part, arm, seed, f"{run['tuning_seconds']:.0f} s", flush=True)
                parts[part][arm].append(done[config])
    result = {"tasks": [{"name": t.name, "weight": t.weight, "flops": t.flops, "default_latency": t.default_latency}
                        for t in model.tasks], "runs": parts}
    result["summary"] = summarise(model, parts)
    return result


def summarise(model, parts: dict) -> dict:
    summary = {}
    if "a" in parts:
        a = {}
        for arm, runs in parts["a"].items():
            a[arm] = {"measure_seconds_per_trial": spread(statistics.fmean(t["run_seconds"] for t in r["trials"])
                                                          for r in runs),
                      "samples_per_trial": spread(statistics.fmean(t["samples"] for t in r["trials"]) for r in runs),
                      "remeasured_estimate": spread(r["remeasured_estimate"] for r in runs)}
        pairs = zip(parts["a"]["adaptive"], parts["a"]["fixed"], strict=True)
        a["remeasured_ratio_adaptive_to_fixed"] = spread(
            geomean(x / y for x, y in zip(r["remeasured"], f["remeasured"], strict=True)) for r, f in pairs)
        summary["a"] = a
    if "b" in parts:
        best = [min(t["latency"] for runs in parts["b"].values() for r in runs for t in r["trials"] if t["task"] == k)
                for k in range(len(model.tasks))]
        b = {"best_known": best}
        for arm, runs in parts["b"].items():
            reached = [reach(r, k, WITHIN * best[k]) for r in runs for k in range(len(model.tasks))]
            b[arm] = {"trials_to_within_5pct": spread(x for x, _ in reached),
                      "seconds_to_within_5pct": spread(s for _, s in reached),
                      "share_reached": sum(x is not None for x, _ in reached) / len(reached)}
        summary["b"] = b
    if "c" in parts:
        goal = WITHIN * min(r["remeasured_estimate"] for runs in parts["c"].values() for r in runs)
        c = {}
        for arm, runs in parts["c"].items():
            c[arm] = {"remeasured_estimate": spread(r["remeasured_estimate"] for r in runs),
                      "tuning_seconds": spread(r["tuning_seconds"] for r in runs),
                      "seconds_to_within_5pct": spread(next((t for t, x in r["curve"] if x <= goal), None)
                                                       for r in runs),
                      "measure_share": spread(share(r, "measure") for r in runs),
                      "search_share": spread(share(r, "search") for r in runs)}
        summary["c"] = c
    return summary


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(results["models"])
    parts = [p for p in "abc" if p in results["models"][models[0]]["runs"]]  # one column per part that ran
    fig, axes = plt.subplots(len(models), len(parts), figsize=(5 * len(parts), 4.5 * len(models)), squeeze=False)
    for cells, name in zip(axes, models, strict=True):
        runs = results["models"][name]["runs"]
        row = dict(zip(parts, cells, strict=True))
        if "a" in runs:
            data = {arm: [t["run_seconds"] for r in rs for t in r["trials"]] for arm, rs in runs["a"].items()}
            row["a"].boxplot(list(data.values()), tick_labels=list(data), showfliers=False)
            row["a"].set_ylabel("measurement seconds per trial")
            row["a"].set_title(f"{name} (a): evaluators")
        if "b" in runs:
            best = results["models"][name]["summary"]["b"]["best_known"]
            data = {arm: [x for r in rs for k in range(len(best)) if (x := reach(r, k, WITHIN * best[k])[0])]
                    for arm, rs in runs["b"].items()}
            row["b"].boxplot(list(data.values()), tick_labels=list(data), showfliers=False)
            row["b"].set_ylabel("trials to within 5 % of the best known (per task)")
            row["b"].set_title(f"{name} (b): cost models")
        if "c" in runs:
            for color, (arm, rs) in zip(("C0", "C1"), runs["c"].items(), strict=False):
                for i, r in enumerate(rs):
                    times, latencies = zip(*r["curve"], strict=True)
                    row["c"].step(times, [1e3 * x for x in latencies], where="post", color=color, alpha=0.7,
                                label=arm if i == 0 else None)
            row["c"].set_xlabel("tuning time (s)")
            row["c"].set_ylabel("estimated model latency (ms)")
            row["c"].set_yscale("log")
            row["c"].set_title(f"{name} (c): gradient scheduler")
            row["c"].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,transformer")
    parser.add_argument("--trials-per-task", type=int, default=64)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--parts", default="abc", help="which comparisons to run: any of a, b, c")
    parser.add_argument("--max-tasks", type=int, default=0, help="tune only the N heaviest tasks (0: all)")
    parser.add_argument("--level", help="graph level (tunewise.lowering.graph.LEVELS; default: the target's)")
    parser.add_argument("--out", default="bench/results/adatune")
    args = parser.parse_args()
    args.seeds = [int(s) for s in args.seeds.split(",")]

    target = targets.resolve(None)
    tvm_env.prepare("llvm")
    measurers = {name: prepare.make_measurer(target, RunSettings(evaluator=name)) for name in ("fixed", "adaptive")}
    long_measurer = measure.Measurer(target, LONG, evaluator="fixed")  # the same yardstick for every arm
    results = {"target": str(target), "level": args.level, "trials_per_task": args.trials_per_task, "seeds": args.seeds,
               "long_evaluation": dataclasses.asdict(LONG), "models": {}}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    try:
        for name in args.models.split(","):
            results["models"][name] = bench_model(name, args, target, measurers, long_measurer)
            with open(args.out + ".json", "w") as f:
                json.dump(provenance.stamped(_finite(results)), f, indent=1)
            plot(results, args.out + ".png")
            print(name, json.dumps(_finite(results["models"][name]["summary"]), indent=1), flush=True)
    finally:
        for m in (*measurers.values(), long_measurer):
            m.close()


def _finite(value):
    """``value`` with every non-finite float replaced by ``None`` (strict JSON has no infinity)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return infinity.to_json(value) if isinstance(value, float) else value


if __name__ == "__main__":
    main()
