"""Benchmark: what a run's whole-model checks read, against its artifact timed in turn with onnxruntime.

::

    tunewise tune MODEL --time-budget 10m --seed 0 -o ART/MODEL --store sqlite:///MODEL.db
    .venv/bin/python bench/studies/checks/taking_turns.py --model MODEL ART/MODEL --repeats 8 --out tt-MODEL.json
    .venv/bin/python bench/studies/checks/check_readings.py sqlite:///MODEL.db=tt-MODEL.json ... \\
        --out bench/studies/checks/results/check-readings.json

For each run (run 1 of each store, beside the ``bench/studies/checks/taking_turns.py`` file that timed its artifact):
each check's own median time, its ratio to the previous check's model in the same rounds and the latency it read
(:func:`tunewise.tuning.model_checks.reading`), as the store holds them; beside them, what the lesser of its own time
and
the previous reading scaled by the ratio would have read, check after check. The *final estimate* is the
estimate the run showed at its end (:func:`tunewise.tuning.estimate.calibrated_latency`, by either rule), set
against the artifact's time as the run timed it after tuning, and in turn with onnxruntime: the median over
all the repeats, and over the repeats whose CPU probes, before and after, found the two CPUs near
(``host_cores.is_near``).
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
from host_cores import is_near

from tunewise import stores
from tunewise.report import summarize
from tunewise.tuning.estimate import calibrated_latency


def lesser_readings(points) -> list[float]:
    """What each check of ``points`` (:class:`~tunewise.stores.ModelLatency`, in time order) would have read
    as the lesser of its own time and the previous reading times their ratio (``inf`` for a failed check)."""
    read, previous = [], None
    for point in points:
        if point.timed is None:  # failed, or not recorded: as stored
            read.append(point.latency)
            previous = point.latency if point.latency != float("inf") else previous
            continue
        latency = point.timed if previous is None else min(point.timed, previous * point.to_previous)
        read.append(latency)
        previous = latency
    return read


def artifact_in_turn(timings: dict) -> dict:
    """The artifact's median time in turn with onnxruntime over all the repeats of a ``taking_turns.py`` file,
    and over those with both probes around it near."""
    repeats = timings["repeats"]
    lowest = min(ns for row in repeats for ns in row["cores_ns"])
    near = [row for row in repeats if all(is_near(ns, lowest) for ns in row["cores_ns"][1:])]
    return {"all": statistics.median(row["in_turn"]["tuned"] for row in repeats),
            "near": statistics.median(row["in_turn"]["tuned"] for row in near) if near else None,
            "near_repeats": len(near), "repeats": len(repeats),
            "ratio_to_onnxruntime": timings["summary"]["in_turn"]["ratio"]["median"]}


def describe(row: dict) -> str:
    """One line of a run's readings against its artifact, in milliseconds."""
    def ms(seconds):
        return "-" if seconds is None else f"{1e3 * seconds:.3f}"

    checks = ", ".join(f"{ms(c['read'])} at {c['elapsed']:.0f}s (itself {ms(c['timed'])}, lesser {ms(c['lesser'])})"
                       for c in row["checks"])
    final, artifact = row["final_estimate"], row["artifact_in_turn"]
    return (f"{row['model']}: checks {checks}; final estimate {ms(final['reading'])} (lesser {ms(final['lesser'])});"
            f" artifact timed by tune {ms(row['artifact_by_tune'])}, in turn {ms(artifact['all'])}, near "
            f"{ms(artifact['near'])} ({artifact['near_repeats']} of {artifact['repeats']} repeats)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="STORE=TAKING_TURNS_JSON")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    rows = []
    for pair in args.runs:
        url, path = pair.rsplit("=", 1)
        with open(path) as f:
            artifact = artifact_in_turn(json.load(f))
        store = stores.create(url, must_exist=True)
        summary = summarize(store, 1)
        points = store.get_model_latencies(1)
        lesser = lesser_readings(points)
        by_tune = store.get_artifacts(1)[-1].metadata["latency_s"]  # as the run timed it, after tuning
        final = {"reading": summary.calibrated,
                 "lesser": calibrated_latency(summary.estimate, summary.curve,
                                              ((p.elapsed, read) for p, read in zip(points, lesser, strict=True)))}
        row = {"store": url, "model": summary.run.model, "trials": summary.trials, "estimate": summary.estimate,
               "checks": [{"elapsed": p.elapsed, "trials": p.trials, "timed": p.timed, "to_previous": p.to_previous,
                           "read": p.latency, "lesser": read} for p, read in zip(points, lesser, strict=True)],
               "final_estimate": final, "artifact_in_turn": artifact, "artifact_by_tune": by_tune,
               "final_over_artifact": {rule: {way: None if artifact[way] is None else value / artifact[way]
                                              for way in ("all", "near")} | {"by_tune": value / by_tune}
                                       for rule, value in final.items()}}
        rows.append(row)
        print(describe(row), flush=True)
        store.close()
    with open(args.out, "w") as f:
        json.dump(provenance.stamped({"runs": rows}), f, indent=1)


if __name__ == "__main__":
    main()
