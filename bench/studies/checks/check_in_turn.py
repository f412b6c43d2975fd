"""Benchmark: a run's last whole-model check against its compiled model, timed alone or in turn with the
check before it.

::

    .venv/bin/python bench/studies/checks/check_in_turn.py --store sqlite:///STORES/MODEL-seed0.db --run 1 \\
        --repeats 10 \\
        --out bench/studies/checks/results/check-in-turn-MODEL.json

A finished run with two checks or more is cut at its last two (check_noise.py's cuts): the model each would
have compiled. Then ``--repeats`` times, a few seconds apart: the earlier cut's model timed alone in a fresh
process, as its check timed it, and the last cut's model timed in turn with it, as a check does
(:meth:`tunewise.tuning.model_checks.ModelCheck.measure`). The last model's *latency* is the median of its times over
the
repeats: what it runs at on this machine, the seconds when it runs slow included. A check is within 1.1x when
its reading is within 1.1x of that, read three ways, over every pairing of the last check's repeat ``i`` with
the earlier check's repeat ``j != i`` (the two checks of a run come minutes apart, in unrelated states of the
machine):

- ``alone``: the last model's own time in repeat ``i``, what a check timed alone reads;
- ``in_turn``: the lesser of that and the earlier model's time in repeat ``j`` times the ratio of the two in
  the same rounds of repeat ``i``;
- ``reading``: what a check reads (:func:`tunewise.tuning.model_checks.reading`) from the same three times: its own
time,
  unless that is over 1.1x the earlier model's scaled by the ratio.

It also reads the ``in_turn`` way with the latency the run's own earlier check stored, and, as ``run_read``,
what the run's own last check would have read in turn: the lesser of the two latencies the run's checks
stored, the earlier scaled by the median ratio over the repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance
from check_noise import compile_cut
from stored_run import open_run

from tunewise.delivery import timing
from tunewise.tuning.model_checks import reading as check_reading


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--run", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    run = open_run(args.store, args.run)
    store = run.database.store
    trials, checkpoints = store.get_trials(args.run), store.get_checkpoints(args.run)
    checks = [p for p in store.get_model_latencies(args.run) if p.message == ""][-2:]
    if len(checks) < 2:
        raise SystemExit(f"run {args.run} of {args.store} has fewer than two successful checks")
    models = []
    for point in checks:
        slot = max((c.slot for c in checkpoints if c.elapsed <= point.elapsed + 1e-9), default=-1)
        models.append(compile_cut(run.model, store, trials, slot)[0])
    earlier, last = models
    rows = []
    for r in range(args.repeats):
        (alone,), _ = timing.time_models([earlier], run.model.inputs)
        side = timing.time_side_by_side([last, earlier], run.model.inputs)
        rows.append({"earlier": alone, "last": side.latencies[0], "last_over_earlier": side.ratio(0, 1)})
        print(f"repeat {r + 1}: earlier {1e3 * alone:.3f} ms, last {1e3 * side.latencies[0]:.3f} ms, "
              f"ratio {side.ratio(0, 1):.3f}", flush=True)
    latency = statistics.median(row["last"] for row in rows)

    def within(reading: float) -> bool:
        return 1 / 1.1 <= reading / latency <= 1.1

    pairs = [(i, j) for i in range(len(rows)) for j in range(len(rows)) if i != j]
    alone = [rows[i]["last"] for i, _ in pairs]
    in_turn = [min(rows[i]["last"], rows[j]["earlier"] * rows[i]["last_over_earlier"]) for i, j in pairs]
    read = [check_reading(rows[i]["last"], rows[j]["earlier"], rows[i]["last_over_earlier"]) for i, j in pairs]
    stored = [min(row["last"], checks[0].latency * row["last_over_earlier"]) for row in rows]
    summary = {"latency": latency, "pairs": len(pairs),
               "alone_within_1_1x": sum(map(within, alone)) / len(alone),
               "in_turn_within_1_1x": sum(map(within, in_turn)) / len(in_turn),
               "reading_within_1_1x": sum(map(within, read)) / len(read),
               "with_stored_earlier_within_1_1x": sum(map(within, stored)) / len(stored),
               "alone_range": [min(alone) / latency, max(alone) / latency],
               "in_turn_range": [min(in_turn) / latency, max(in_turn) / latency],
               "reading_range": [min(read) / latency, max(read) / latency],
               "stored_earlier_ms": checks[0].latency * 1e3, "stored_last_ms": checks[1].latency * 1e3}
    ratio = statistics.median(row["last_over_earlier"] for row in rows)
    summary["run_read_ms"] = 1e3 * min(checks[1].latency, checks[0].latency * ratio)
    summary["run_read_over_latency"] = summary["run_read_ms"] / 1e3 / latency
    print(f"latency {1e3 * latency:.3f} ms; within 1.1x: alone {summary['alone_within_1_1x']:.0%} "
          f"[{summary['alone_range'][0]:.2f}-{summary['alone_range'][1]:.2f}], in turn "
          f"{summary['in_turn_within_1_1x']:.0%} [{summary['in_turn_range'][0]:.2f}-{summary['in_turn_range'][1]:.2f}]"
          f", read {summary['reading_within_1_1x']:.0%} "
          f"[{summary['reading_range'][0]:.2f}-{summary['reading_range'][1]:.2f}]"
          f", in turn with the stored earlier check ({1e3 * checks[0].latency:.3f} ms) "
          f"{summary['with_stored_earlier_within_1_1x']:.0%}; the run's last check ({1e3 * checks[1].latency:.3f} ms) "
          f"in turn {summary['run_read_ms']:.3f} ms, {summary['run_read_over_latency']:.2f}x")
    with open(args.out, "w") as f:
        json.dump(provenance.stamped({"store": args.store, "run": args.run, "model": run.model.name,
                                      "target": str(run.target), "checks": [vars(p) for p in checks],
                                      "repeats": rows, "summary": summary}), f, indent=1)


if __name__ == "__main__":
    main()
