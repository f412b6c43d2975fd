"""Benchmark: the tuned model against onnxruntime, timed one process after the other or taking turns.

::

    .venv/bin/python bench/studies/checks/taking_turns.py --model mobilenetv2 ART/mobilenetv2 --repeats 12 \\
        --out bench/studies/checks/results/taking-turns-mobilenetv2.json

An artifact is compared with onnxruntime ``--repeats`` times, each time in two ways, one after the other:

- ``apart``: the artifact timed in a fresh process of its own (:func:`tunewise.delivery.timing.time_models`), then the
  references in another (:func:`tunewise.delivery.timing.reference_latencies`), and the ratio of the two medians;
- ``in_turn``: the two processes taking turns round by round (:func:`tunewise.delivery.timing.time_side_by_side`, what
  ``tunewise tune`` does after tuning), and the median of the per-round ratios.

How far apart the machine's two CPUs are (``host_cores.Probe``) is probed before each way and after the last.
The summary gives, per way, the ratio's median and its spread over the repeats (max over min): the less it
moves from one repeat to the next, the less one comparison says about the second it was taken in.
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
from host_cores import Probe
from time_artifacts import add_artifact_arguments, load_artifact


def spread(values: list[float]) -> dict:
    """Median, min, max and max over min of ``values``."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "max_over_min": max(values) / min(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_artifact_arguments(parser)
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--out")
    args = parser.parse_args()
    from tunewise.delivery import timing

    compiled, model, inputs = load_artifact(args)
    rows = []
    with Probe() as probe:
        for r in range(args.repeats):
            row = {"cores_ns": [probe.one_way_ns()]}
            (alone,), _ = timing.time_models([compiled], inputs)
            refs = timing.reference_latencies(model, inputs, seed=args.seed)
            row["apart"] = {"tuned": alone, "onnxruntime": refs["onnxruntime"],
                            "ratio": alone / refs["onnxruntime"]}
            row["cores_ns"].append(probe.one_way_ns())
            side = timing.time_side_by_side([compiled], inputs, references=timing.References(model, seed=args.seed))
            row["in_turn"] = {"tuned": side.latencies[0], "onnxruntime": side.references["onnxruntime"],
                              "ratio": side.ratios[0]["onnxruntime"]}
            row["cores_ns"].append(probe.one_way_ns())
            rows.append(row)
            print(f"repeat {r + 1}: " + "; ".join(
                f"{way} {1e3 * row[way]['tuned']:.3f} / {1e3 * row[way]['onnxruntime']:.3f} ms = "
                f"{row[way]['ratio']:.3f}" for way in ("apart", "in_turn"))
                  + f"; cores {', '.join(f'{ns:.0f}' for ns in row['cores_ns'])} ns", flush=True)
    summary = {way: {key: spread([row[way][key] for row in rows]) for key in ("tuned", "onnxruntime", "ratio")}
               for way in ("apart", "in_turn")}
    for way, s in summary.items():
        print(f"{way}: ratio {s['ratio']['median']:.3f} [{s['ratio']['min']:.3f}-{s['ratio']['max']:.3f}], "
              f"{s['ratio']['max_over_min']:.2f}x; tuned {s['tuned']['max_over_min']:.2f}x, "
              f"onnxruntime {s['onnxruntime']['max_over_min']:.2f}x")
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"provenance": provenance.stamp(), "settings": vars(args), "repeats": rows,
                       "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
