"""Where each scheduler's trials went, task by task, by the time it came within 5 % (no TVM).

For one seed of a trace (``bench/record_traces.py``), replays each scheduler as ``bench/replay.py`` does
and prints, per task, the trials it had spent when the model first came within ``--goal`` of the best
reachable latency, next to the clairvoyant bound's allocation (:func:`tunewise.lab.oracles.fastest_allocation`).
Tasks where a scheduler spent more than the bound show where its time went::

    .venv/bin/python bench/allocations.py bench/traces/mobilenetv2.json.gz --seed 0

Decision time is not charged (``decision_cost=0``), so the allocations are the schedulers' choices alone.
Only tasks to which some scheduler gave at least ``--min-trials`` are printed.
"""

from __future__ import annotations

import argparse
import collections

from replay import build  # bench/replay.py: the same schedulers and oracles, built the same way

from tunewise import replay as rp
from tunewise.lab import oracles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="a trace written by bench/record_traces.py")
    parser.add_argument("--seed", type=int, default=0, help="which recorded seed to replay")
    parser.add_argument("--schedulers", default="gradient,dynatune,oracle,oracle-other-seeds")
    parser.add_argument("--goal", type=float, default=0.05, help="within this fraction of the best reachable")
    parser.add_argument("--trials-per-slot", type=int, default=16)
    parser.add_argument("--min-trials", type=int, default=64)
    args = parser.parse_args()

    trace = rp.Trace.load(args.trace)
    if not 0 <= args.seed < trace.seeds:
        parser.error(f"--seed must be in 0..{trace.seeds - 1}: the trace has {trace.seeds} seed(s)")
    if args.goal < 0:
        parser.error(f"--goal must be at least 0 (a fraction above the best reachable), got {args.goal}")
    goal = (1 + args.goal) * trace.best_reachable(args.seed)
    bound = oracles.fastest_allocation(trace, goal, seed_index=args.seed, trials_per_slot=args.trials_per_slot)
    columns = {"bound": list(bound.trials)}
    print(f"{trace.model}, seed {args.seed}: within {100 * args.goal:g} % at")
    print(f"  {'bound':20s} {bound.seconds:7.0f} s")
    for name in args.schedulers.split(","):
        run = rp.replay(trace, build(name, trace, args.seed), seed_index=args.seed,
                        trials_per_slot=args.trials_per_slot, decision_cost=0.0)
        # history[i] is the model after i slots
        slots = next((i for i, (_, latency) in enumerate(run.history) if latency <= goal), None)
        if slots is None:
            print(f"  {name:20s}   never")
            continue
        picked = collections.Counter(run.picks[:slots])
        columns[name] = [task.trials_history[picked[task.index] - 1] if picked[task.index] else 0
                         for task in run.final.tasks]
        print(f"  {name:20s} {run.history[slots][0]:7.0f} s")

    print()
    print(f"{'task':40s} {'share %':>8s} " + " ".join(f"{n[:12]:>12s}" for n in columns))
    best = trace.best_reachable(args.seed)
    for k, task in enumerate(trace.tasks):
        if max(c[k] for c in columns.values()) < args.min_trials:
            continue
        share = 100 * task.weight * min(trace.runs[args.seed][k].latencies + (task.default_latency,)) / best
        print(f"{task.name[:40]:40s} {share:8.2f} " + " ".join(f"{c[k]:12d}" for c in columns.values()))


if __name__ == "__main__":
    main()
