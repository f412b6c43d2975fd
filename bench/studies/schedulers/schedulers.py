"""Benchmark: the baseline task schedulers in tunewise's loop against stock MetaSchedule, on one model.

Run by hand, never in CI (ResNet-18 at 600 trials takes over an hour on 2 cores)::

    .venv/bin/python bench/studies/schedulers/schedulers.py --model resnet18 --trials 600 \
        --out bench/results/resnet18-schedulers

Our runs share schedules between tasks of one anchor (``tunewise.sharing``) unless ``--no-share``; runs
made before sharing existed have no ``share`` key in the JSON.

Everything shares one import, one task extraction and one measurement of the default latencies. Each run
tunes from an empty database. Stock MetaSchedule is ``stock.tune``: ``ms.tune_tasks(task_scheduler="gradient")`` with
its defaults (64 trials per iteration, XGBoost, evolutionary search, ``LocalBuilder``/``LocalRunner`` with the
same evaluator settings), changed only by the build function that skips the tensor-intrinsic import
(without it every build times out here). Its model-latency curve is computed like ours, from the best
latency of each task after each of its batches (tracked by a measure callback) and the same default
latencies. The sequential scheduler gets a per-task budget of ``ceil(trials / tasks)``, as AutoTVM did.

``--merge`` keeps the runs of an earlier invocation (each run is independent; each invocation measures its
own default latencies, so curves from two invocations start from slightly different estimates).

Each run's compiled model is timed when the run ends (``compiled_latency``) and, once all runs of the
invocation are done, again in ``--retime-rounds`` rounds that time every model in turn
(``compiled_latency_retimed``, the median): the runs take minutes each, and a single timing taken at the end
of each one compares models timed in different spells of the machine. Even in turn, models that live in one
long process are not timed alike on the 2-core VM: the same records compiled again in a new process ranked
two runs the other way round. With ``--keep-stores`` every compiled model is also saved as an artifact, and
``bench/time_artifacts.py`` times artifacts in fresh processes.

``--rescore PASSES`` re-measures, once all runs are done, every candidate that was some run's best of some
task at some point of its curve, all runs' candidates in one shuffled batch, ``PASSES`` times (the median
counts), and redraws every curve with those latencies (``curve_rescored``, ``seconds_to_within_5pct_rescored``
against the best rescored final estimate). A run's own curve adds up latencies measured over minutes of a
drifting machine, once each: on the Transformer, the one candidate of the GELU task holds half the model,
and its single measurement differed by 25 % between two runs, more than the gap between their final
estimates. Rescored, every curve is measured in the same spell.

Writes ``OUT.json`` (curves, final compiled latencies, trials per minute, time to reach within 5 % of the
best final estimate) and ``OUT.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance
import stock

from tunewise import callbacks, stores, zoo
from tunewise import target as targets
from tunewise.delivery import compile as compiler
from tunewise.delivery import timing
from tunewise.job import prepare
from tunewise.settings import RunSettings
from tunewise.tuning import measure, session, tvm_env


def compile_model(model, database=None, *, apply_all: bool = False) -> compiler.CompiledModel:
    """The model compiled with ``database``, its outputs checked against the reference."""
    from tvm.s_tir import meta_schedule as ms

    if apply_all:  # stock: every task's best record, as compile_relax does
        executable = ms.relax_integration.compile_relax(database, model.mod, model.target, params=None)
    else:
        executable = compiler.build(model, database)
    compiled = compiler.CompiledModel(executable, model.target)
    compiler.verify(compiled, model.inputs, model.reference_outputs)
    return compiled


def retime(compiled: dict[str, compiler.CompiledModel], inputs, rounds: int) -> dict[str, float]:
    """Each model's median latency over ``rounds`` rounds that time every model in turn (10 repeats each),
    so that a slow spell of the machine hits them all alike rather than whichever ran then."""
    samples: dict[str, list[float]] = {name: [] for name in compiled}
    for _ in range(rounds):
        for name, model in compiled.items():
            samples[name].append(model.time(*inputs, repeat=10).median)
    return {name: statistics.median(xs) for name, xs in samples.items()}


def run_ours(model, name: str, trials: int, measurer, seed: int, keep: str | None, share: bool,
             level: str) -> tuple[dict, compiler.CompiledModel, list]:
    per_task = math.ceil(trials / len(model.tasks)) if name == "sequential" else None
    # every run tunes from an empty database: in memory, or a new file in the folder ``keep``
    url = "sqlite://"
    if keep:
        path = os.path.join(keep, f"{model.name}-{name}-{time.strftime('%Y%m%d-%H%M%S')}.db")
        url = f"sqlite:///{path}"
    settings = RunSettings(source=model.name, scheduler=name, budget=session.Budget(max_trials=trials,
                                                                                    per_task_trials=per_task),
                           level=level, seed=seed, share=share)
    log = callbacks.SlotLog()
    loop = prepare.open_session(model, settings, store=stores.create(url), measurer=measurer, callbacks=[log])
    final = loop.run()
    events = log.events
    return {"curve": [list(p) for p in loop.history], "trials": final.trials, "share": share, "shared": loop.shared,
            "failures": sum(t.failures for t in final.tasks), "tuning_seconds": final.elapsed,
            "decision_seconds": loop.decision_seconds,
            "search_seconds": sum(e.search_seconds for e in events),
            "measure_seconds": sum(e.measure_seconds for e in events),
            "tasks_tuned": len({e.task for e in events}),
            "trials_per_minute": 60 * final.trials / final.elapsed,
            "final_estimate": final.estimated_latency()}, compile_model(model, loop.database), bests_of(loop)


def bests_of(loop: session.Session) -> list[tuple[int, int, tuple]]:
    """``(curve point, task, (module, args_info))`` for every trial of ``loop`` that was its task's best
    so far, from the curve point after its slot on (point ``i`` follows slot ``i - 1``)."""
    best, out = [math.inf] * len(loop.model.tasks), []
    for trial in loop.trials:
        if trial.latency < best[trial.task]:
            best[trial.task] = trial.latency
            candidate = loop.database.record(trial).as_measure_candidate()
            out.append((trial.slot + 1, trial.task, (candidate.sch.mod, candidate.args_info)))
    return out


def rescore(model, measurer, runs: dict[str, tuple[list, list]], passes: int, seed: int) -> dict[str, list]:
    """Each run's curve (``runs[name] = (curve, bests)``, ``bests`` as :func:`bests_of` gives them) with every
    best candidate's latency re-measured: all runs' candidates in one batch, shuffled anew for each of
    ``passes`` passes, the median counting."""
    batch = [(name, i) for name, (_, bests) in runs.items() for i in range(len(bests))]
    samples: dict[tuple[str, int], list[float]] = {key: [] for key in batch}
    rng = random.Random(seed)
    for _ in range(passes):
        order = rng.sample(batch, len(batch))
        measured = measurer.measure([runs[name][1][i][2] for name, i in order])
        for key, m in zip(order, measured, strict=True):
            samples[key].append(m.latency)
    out = {}
    for name, (curve, bests) in runs.items():
        latency = [t.default_latency for t in model.tasks]
        changes: dict[int, list[tuple[int, float]]] = {}
        for i, (point, task, _) in enumerate(bests):
            changes.setdefault(point, []).append((task, statistics.median(samples[name, i])))
        rescored = []
        for point, (elapsed, _) in enumerate(curve):
            for task, value in changes.get(point, []):
                latency[task] = value
            rescored.append([elapsed, sum(t.weight * min(x, t.default_latency)
                                          for t, x in zip(model.tasks, latency, strict=True))])
        out[name] = rescored
    return out


def run_stock(model, trials: int, config: measure.MeasureConfig,
              seed: int) -> tuple[dict, compiler.CompiledModel, list]:
    best = [math.inf] * len(model.tasks)
    tuned = set()
    curve = []
    bests = []  # as bests_of gives them
    start = [0.0]

    def estimate() -> float:
        return sum(t.weight * min(b, t.default_latency) for t, b in zip(model.tasks, best, strict=True))

    def track(task_id, candidates, builder_results, runner_results) -> None:
        tuned.add(task_id)
        for candidate, result in zip(candidates, runner_results, strict=True):
            seconds = stock.mean_seconds(result)
            if seconds is not None and seconds < best[task_id]:
                best[task_id] = seconds
                bests.append((len(curve), task_id, (candidate.sch.mod, candidate.args_info)))
        curve.append([time.perf_counter() - start[0], estimate()])

    tasks, database = stock.contexts(model, seed), stock.database()
    start[0] = time.perf_counter()
    curve.append([0.0, estimate()])
    stock.tune(model, tasks, database, stock.builder(), stock.runner(config), trials=trials, on_batch=track)
    elapsed = time.perf_counter() - start[0]
    records = database.get_all_tuning_records()
    return {"curve": curve, "trials": len(records),
            "failures": sum(1 for r in records if not r.run_secs or min(float(x) for x in r.run_secs) >= 1e9),
            "tuning_seconds": elapsed, "tasks_tuned": len(tuned),
            "trials_per_minute": 60 * len(records) / elapsed,
            "final_estimate": estimate()}, compile_model(model, database, apply_all=True), bests


def time_to_reach(curve, goal: float) -> float | None:
    return next((t for t, latency in curve if latency <= goal), None)


def plot(results: dict, model_name: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for name, run in results["runs"].items():
        times, latencies = zip(*run["curve"], strict=True)
        line, = ax.step(times, [1e3 * x for x in latencies], where="post", label=name,
                        linestyle="--" if name.startswith("stock") else "-")
        if "curve_rescored" in run:
            times, latencies = zip(*run["curve_rescored"], strict=True)
            ax.step(times, [1e3 * x for x in latencies], where="post", label=f"{name}, rescored",
                    color=line.get_color(), linestyle=":", linewidth=2)
    ax.set_xlabel("tuning time (s)")
    ax.set_ylabel("estimated model latency (ms)")
    ax.set_yscale("log")
    ax.set_title(f"{model_name}: model latency vs tuning time, {results['trials']} trials")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--trials", type=int, default=600)
    parser.add_argument("--schedulers", default="sequential,round-robin,random,flops,gradient")
    parser.add_argument("--no-stock", action="store_true")
    parser.add_argument("--no-share", action="store_true", help="our runs tune every task alone (tunewise.sharing)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--level", help="graph level (tunewise.lowering.graph.LEVELS; default: the target's)")
    parser.add_argument("--out", default="bench/results/schedulers")
    parser.add_argument("--keep-stores", metavar="DIR", help="keep each run of ours in DIR/MODEL-NAME-TIME.db and "
                        "every run's compiled model as an artifact folder DIR/MODEL-seedS-NAME-TIME")
    parser.add_argument("--retime-rounds", type=int, default=5,
                        help="after the runs, time this invocation's compiled models in turn this many rounds (0: no)")
    parser.add_argument("--rescore", type=int, default=0, metavar="PASSES",
                        help="after the runs, re-measure every run's best candidates in PASSES shuffled passes and "
                             "redraw the curves with them (0: no)")
    parser.add_argument("--merge", help="a JSON from an earlier invocation whose runs are kept (same model)")
    args = parser.parse_args()

    target = targets.resolve(None)
    tvm_env.prepare("llvm")
    _, inputs = zoo.get(args.model, seed=args.seed)
    eager, onnxruntime = timing.time_references(args.model, [x.numpy() for x in inputs], seed=args.seed)
    results = {"model": args.model, "trials": args.trials, "level": args.level, "target": str(target),
               "torch_eager_latency": eager, "onnxruntime_latency": onnxruntime, "runs": {}}
    settings = RunSettings(source=args.model, level=args.level, seed=args.seed)
    config = settings.measure
    measurer = prepare.make_measurer(target, settings)
    model = prepare.load_model(args.model, settings, target=target, measurer=measurer)
    results["tasks"] = [{"name": t.name, "weight": t.weight, "flops": t.flops, "default_latency": t.default_latency}
                        for t in model.tasks]
    results["untuned_compiled_latency"] = compile_model(model).time(*model.inputs, repeat=10).median
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)

    def save() -> None:
        finals = [run["final_estimate"] for run in results["runs"].values()]
        for run in results["runs"].values():
            run["seconds_to_within_5pct"] = time_to_reach(run["curve"], 1.05 * min(finals))
        rescored = [run["curve_rescored"][-1][1] for run in results["runs"].values() if "curve_rescored" in run]
        for run in results["runs"].values():
            if "curve_rescored" in run:
                run["seconds_to_within_5pct_rescored"] = time_to_reach(run["curve_rescored"], 1.05 * min(rescored))
        with open(args.out + ".json", "w") as f:
            json.dump(provenance.stamped(results), f, indent=1)
        plot(results, args.model, args.out + ".png")

    if args.keep_stores:
        os.makedirs(args.keep_stores, exist_ok=True)
    if args.merge:
        with open(args.merge) as f:
            earlier = json.load(f)
        # a JSON without a level predates the nhwc default: it was tuned at fold-bn
        if (earlier["model"], earlier["trials"], earlier.get("level", "fold-bn")) != (args.model, args.trials,
                                                                                     args.level):
            raise SystemExit(f"{args.merge} is for another model, budget or graph level")
        results["runs"].update(earlier["runs"])
    runs = [] if args.no_stock else [("stock-gradient", lambda: run_stock(model, args.trials, config, args.seed))]
    runs += [(name, lambda n=name: run_ours(model, n, args.trials, measurer, args.seed, args.keep_stores,
                                            not args.no_share, args.level))
             for name in args.schedulers.split(",") if name]
    if args.merge:
        rerun = {name for name, _ in runs}
        results["merged_from"] = {name: args.merge for name in earlier["runs"] if name not in rerun}
    compiled: dict[str, compiler.CompiledModel] = {}  # this invocation's models, for the re-timing
    bests: dict[str, list] = {}  # this invocation's best candidates, for the rescoring
    for name, run in runs:
        try:
            results["runs"][name], compiled[name], bests[name] = run()
            results["runs"][name]["compiled_latency"] = compiled[name].time(*model.inputs, repeat=10).median
            if args.keep_stores:  # for bench/time_artifacts.py, which times each in fresh processes
                results["runs"][name]["artifact"] = compiled[name].save(os.path.join(
                    args.keep_stores, f"{args.model}-seed{args.seed}-{name}-{time.strftime('%Y%m%d-%H%M%S')}"))
        except Exception as err:  # keep the other runs' results; say which one failed and why
            results.setdefault("errors", {})[name] = f"{type(err).__name__}: {err}"
            print(name, "failed:", results["errors"][name], flush=True)
            continue
        save()
        print(name, {k: v for k, v in results["runs"][name].items() if k != "curve"}, flush=True)
    if len(compiled) > 1 and args.retime_rounds:
        results["retimed"] = {"rounds": args.retime_rounds, **retime(compiled, model.inputs, args.retime_rounds)}
        for name, latency in results["retimed"].items():
            if name in results["runs"]:
                results["runs"][name]["compiled_latency_retimed"] = latency
        save()
        print("re-timed in turn:", results["retimed"], flush=True)
    if bests and args.rescore:
        curves = rescore(model, measurer, {name: (results["runs"][name]["curve"], b) for name, b in bests.items()},
                         args.rescore, args.seed)
        for name, curve in curves.items():
            results["runs"][name]["curve_rescored"] = curve
        save()
        print("rescored:", {name: (run["curve_rescored"][-1][1], run["seconds_to_within_5pct_rescored"])
                            for name, run in results["runs"].items() if "curve_rescored" in run}, flush=True)
    measurer.close()


if __name__ == "__main__":
    main()
