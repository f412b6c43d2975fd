"""Benchmark: task schedulers side by side in real runs, by the compiled model's latency over tuning time.

::

    .venv/bin/python bench/studies/schedulers/scheduler_runs.py --models resnet18,mobilenetv2 \\
        --schedulers gradient,expected-gain \\
        --minutes 10 --out bench/studies/schedulers/results/scheduler-runs.json

Per model: one import, one extraction and one measurement of the default latencies, shared by every run.
Then each scheduler in turn tunes from an empty store (in memory, or kept with ``--keep-stores`` for
``bench/studies/estimate/estimate_gap.py`` to read) for ``--minutes`` of tuning time, with
:class:`tunewise.settings.RunSettings`' defaults for everything else, as ``bench/headline.py``'s ``tunewise``
arm does (:func:`headline.run_ours`): at each of ``--checkpoints`` (minutes of tuning time) and at the end,
the model is compiled with the run's best records so far, verified and timed in a fresh process, its
tuning clock stopped meanwhile. Reported per model: its ``tasks`` (name, weight, untuned latency in ms); per
scheduler: the compiled curve and the estimate's, ``final_ms``, ``trials``, ``slots`` (task, trials, seconds of
each slot, in order), and ``ttq5_s``, the first checkpoint within 5 % of the best final compiled latency
of any scheduler on that model (:func:`tunewise.lab.curves.time_to_quality`). The JSON holds the command
line, the commit and the CPU model (:mod:`provenance`), written after every run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import headline
import provenance

from tunewise import target as targets
from tunewise.delivery import timing
from tunewise.importing import frontend
from tunewise.job import prepare
from tunewise.lab.curves import time_to_quality
from tunewise.lowering import tasks
from tunewise.settings import RunSettings
from tunewise.tuning import tvm_env
from tunewise.tuning.session import Budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet18,mobilenetv2", help="as bench/headline.py takes them")
    parser.add_argument("--schedulers", default="gradient,expected-gain")
    parser.add_argument("--minutes", type=float, default=10.0, help="tuning time of each run")
    parser.add_argument("--checkpoints", default="2,4,6,8", help="minutes of tuning time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-stores", metavar="DIR",
                        help="tune into SQLite stores DIR/MODEL-SCHEDULER.db, kept (default: in memory)")
    parser.add_argument("--out", default="bench/results/scheduler-runs.json")
    args = parser.parse_args()
    seconds = 60 * args.minutes
    times = [60 * float(m) for m in args.checkpoints.split(",") if m and 60 * float(m) < seconds]
    names = args.schedulers.split(",")
    target = targets.resolve(None)
    result = {"cpu": provenance.cpu_model(), "target": str(target), "minutes": args.minutes, "seed": args.seed,
              "checkpoints_min": [t / 60 for t in times], "schedulers": names, "models": {}}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    if args.keep_stores:
        os.makedirs(args.keep_stores, exist_ok=True)
    tvm_env.prepare("llvm")
    with tempfile.TemporaryDirectory(prefix="scheduler-runs-") as folder:
        for name, source in headline.sources(args.models.split(","), folder, args.seed).items():
            entry = result["models"].setdefault(name, {})
            imported = frontend.load(source, seed=args.seed)
            base = RunSettings(source=source, seed=args.seed, budget=Budget(max_trials=10**7))
            measurer = prepare.make_measurer(target, base)
            try:
                model = tasks.extract(imported, target, level=base.level, measurer=measurer)
                entry["tasks"] = [(t.name, t.weight, t.default_latency * 1e3) for t in model.tasks]
                for scheduler in names:
                    settings = dataclasses.replace(base, scheduler=scheduler)
                    url = ("sqlite://" if args.keep_stores is None
                           else f"sqlite:///{os.path.abspath(args.keep_stores)}/{name}-{scheduler}.db")
                    entry[scheduler] = headline.run_ours(model, settings, measurer, seconds, times, url,
                                                         timing.References(source, seed=args.seed))
                    entry[scheduler]["provenance"] = provenance.stamp()
                    if all(s in entry for s in names):
                        goal, reached = time_to_quality({s: entry[s]["compiled"] for s in names}, within=0.05)
                        entry["goal_ms"] = goal
                        for s in names:
                            entry[s]["ttq5_s"] = reached[s]
                    with open(args.out, "w") as f:
                        json.dump(provenance.stamped(result), f, indent=1)
                    shown = {k: v for k, v in entry[scheduler].items() if k not in ("estimate", "slots")}
                    print(name, scheduler, shown, flush=True)
            finally:
                measurer.close()


if __name__ == "__main__":
    main()
