"""Benchmark: the evolutionary search's generations a call, in trials a minute and in quality per trial.

::

    .venv/bin/python bench/studies/search/generations.py --model mobilenetv2 --minutes 10 --generations 4,2 --seed 1 \
        --out bench/results/generations-mobilenetv2-seed1.json

For each ``--generations`` value in turn, one run of our loop (the defaults of
:class:`tunewise.settings.RunSettings`, the cold filter on) tunes the model from an empty store for
``--minutes`` minutes, its search calls evolving for that many generations (:data:`tunewise.tuning.search.GENERATIONS`).
All arms share one extraction and one measurer, one after the other in one process. Each arm records its
trials, trials a minute, and its estimate after every slot against the trials measured so far, so that arms
compare at equal trials (quality per trial) as well as at equal time. A file given with ``--resume`` keeps the
arms it holds (for the same model, seed, minutes and CPU target) and runs the missing ones. The JSON holds the
command line, the commit and the CPU model (:mod:`provenance`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import stores
from tunewise.job import prepare
from tunewise.settings import RunSettings
from tunewise.target import resolve
from tunewise.tuning import search, session, tvm_env


def run_arm(model, settings: RunSettings, measurer, generations: int, minutes: float) -> dict:
    search.GENERATIONS = generations
    store = stores.create("sqlite://")
    start = time.perf_counter()
    loop = prepare.open_session(model, settings, store=store, measurer=measurer,
                                deadline=lambda snapshot: start + 60 * minutes)
    loop.run()
    trials, curve = 0, []
    for checkpoint in store.get_checkpoints(loop.run_id):
        trials += checkpoint.trials
        curve.append((trials, checkpoint.elapsed, checkpoint.latency * 1e3))
    tuning = curve[-1][1]
    return {"trials": trials, "tuning_s": tuning, "trials_per_min": 60 * trials / tuning, "final_ms": curve[-1][2],
            "curve": curve, "provenance": provenance.stamp()}


def run_arms(model, settings: RunSettings, measurer, arms: dict, minutes: float, out: str, key: dict,
             results: dict) -> None:
    """Run each arm of ``arms`` (name -> ``(generations, set_up)``, ``set_up()`` called first) missing from
    ``results`` as :func:`run_arm`, writing ``out`` (``key`` and the arms so far) after each."""
    for name, (generations, set_up) in arms.items():
        if name in results:
            continue
        set_up()
        results[name] = run_arm(model, settings, measurer, generations, minutes)
        with open(out, "w") as f:
            json.dump(provenance.stamped({"key": key, "arms": results}), f, indent=1)
        arm = results[name]
        print(f"{name}: {arm['trials']} trials, {arm['trials_per_min']:.1f} a minute, "
              f"estimate {arm['final_ms']:.2f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="mobilenetv2")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--generations", default="4,2", help="comma-separated generations, one arm each")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    tvm_env.prepare("llvm")
    target = resolve(None)
    key = {"model": args.model, "seed": args.seed, "minutes": args.minutes, "target": str(target)}
    results = {}
    if args.resume and os.path.exists(args.out):
        with open(args.out) as f:
            saved = json.load(f)
        if saved["key"] != key:
            raise SystemExit(f"{args.out} holds another model, seed, budget or CPU: {saved['key']}")
        results = saved["arms"]
    settings = RunSettings(source=args.model, seed=args.seed, budget=session.Budget(max_trials=10**7),
                           candidate_filter="cold")
    measurer = prepare.make_measurer(target, settings)
    try:
        model = prepare.load_model(args.model, settings, target=target, measurer=measurer)
        arms = {g: (int(g), lambda: None) for g in args.generations.split(",")}
        run_arms(model, settings, measurer, arms, args.minutes, args.out, key, results)
    finally:
        measurer.close()


if __name__ == "__main__":
    main()
