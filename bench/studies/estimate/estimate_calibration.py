"""How well a whole-model check brings the estimate to the compiled model, on recorded runs.

::

    .venv/bin/python bench/studies/estimate/estimate_calibration.py \\
        bench/studies/schedulers/results/scheduler-runs-*.json \\
        --out bench/studies/estimate/results/estimate-calibration.json
    .venv/bin/python bench/studies/estimate/estimate_calibration.py \\
        --stores sqlite:///resnet18.db sqlite:///mobilenetv2.db \\
        --out bench/studies/estimate/results/estimate-in-model.json

Reads ``bench/studies/schedulers/scheduler_runs.py`` results: per run, the model compiled and timed at checkpoints and
at the end, and the estimate after every slot. For every checkpoint before the end, it predicts the final compiled
latency from the final estimate as :func:`tunewise.tuning.estimate.calibrated_latency` does (the gap the checkpoint
measured,
added), and as a ratio would (the estimate scaled by what the checkpoint measured over the estimate then), and
reports each prediction over the final compiled latency: 1.0 is exact. The last line counts, per checkpoint
age, the runs predicted within 1.1x, with the uncalibrated estimate's count beside.

With ``--stores``, it reads instead every finished run of the stores ``tunewise tune`` wrote: the estimate at
the end, the estimate in the model as the run's last check brought it (what ``tunewise show`` says), and the
final records' compiled model, timed as ``tune`` timed it (beside a check's model when that was faster, and
the artifact).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import report, stores
from tunewise.tuning.estimate import calibrated_latency, estimate_at


def predictions(run: dict) -> list[dict]:
    """Per checkpoint before the end: its tuning time and what the gap and the ratio predict, over the final
    compiled latency."""
    curve = [tuple(point) for point in run["estimate"]]
    (*checks, (end, final)) = [tuple(point) for point in run["compiled"]]
    estimate = curve[-1][1]
    rows = []
    for at, latency in checks:
        then = estimate_at(curve, at)
        rows.append({"check_s": at, "before_end_s": end - at,
                     "gap": calibrated_latency(estimate, curve, [(at, latency)]) / final,
                     "ratio": estimate * latency / then / final})
    return rows


def stored_runs(urls: list[str]) -> list[dict]:
    """Every finished run of the stores at ``urls`` with an artifact: its estimate at the end, in the model as
    its last check brought it, and compiled (the artifact's latency), in seconds."""
    runs = []
    for url in urls:
        store = stores.create(url, must_exist=True)
        for run in store.get_runs():
            summary = report.summarize(store, run.id)
            if not summary.artifacts:
                continue
            metadata = summary.artifacts[-1].metadata  # the final records' model (the artifact may be a check's)
            compiled = metadata.get("final_records_latency_s") or metadata["latency_s"]
            runs.append({"store": url, "run": run.id, "model": run.model, "target": run.target,
                         "tuning_s": summary.elapsed, "onnxruntime": metadata.get("onnxruntime_latency_s"),
                         "artifact": metadata["latency_s"],
                         "checks": [(m.elapsed, m.latency) for m in summary.measured],
                         "estimate": summary.estimate, "in_model": summary.calibrated, "compiled": compiled,
                         "compiled_over_estimate": compiled / summary.estimate,
                         "compiled_over_in_model": compiled / summary.calibrated})
            print(f"{run.model:12s} estimate {1e3 * summary.estimate:.3f} ms, in the model "
                  f"{1e3 * summary.calibrated:.3f} ms, compiled {1e3 * compiled:.3f} ms: "
                  f"{compiled / summary.estimate:.2f}x the estimate, "
                  f"{compiled / summary.calibrated:.2f}x the estimate in the model")
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="*", help="bench/studies/schedulers/scheduler_runs.py result files")
    parser.add_argument("--stores", nargs="+", help="store URLs of tunewise tune runs, read instead")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.stores:
        with open(args.out, "w") as f:
            json.dump(provenance.stamped({"runs": stored_runs(args.stores)}), f, indent=1)
        return
    if not args.results:
        parser.error("give scheduler_runs.py result files, or --stores")

    runs, within = [], defaultdict(lambda: {"gap": 0, "ratio": 0, "runs": 0})
    uncalibrated = 0
    for path in args.results:
        with open(path) as f:
            result = json.load(f)
        for model, by_scheduler in result["models"].items():
            for scheduler, run in by_scheduler.items():
                if not isinstance(run, dict) or "compiled" not in run:
                    continue
                rows = predictions(run)
                final = run["compiled"][-1][1]
                plain = run["estimate"][-1][1] / final
                uncalibrated += 1 / 1.1 <= plain <= 1.1
                runs.append({"file": path, "model": model, "scheduler": scheduler, "final_ms": final,
                             "estimate_over_final": plain, "checks": rows})
                for back, row in enumerate(reversed(rows), 1):  # 1: the last checkpoint before the end
                    counts = within[back]
                    counts["runs"] += 1
                    for rule in ("gap", "ratio"):
                        counts[rule] += 1 / 1.1 <= row[rule] <= 1.1
                print(f"{model:12s} {scheduler:14s} estimate/final {plain:.2f}; from the checks (last first): "
                      + ", ".join(f"gap {r['gap']:.2f} ratio {r['ratio']:.2f}" for r in reversed(rows)))
    summary = {back: counts for back, counts in sorted(within.items())}
    with open(args.out, "w") as f:
        json.dump(provenance.stamped({"runs": runs, "within_1_1x_by_checkpoint_back": summary,
                                      "uncalibrated_within_1_1x": uncalibrated, "total_runs": len(runs)}), f,
                  indent=1)
    print(f"within 1.1x of the final compiled latency, of {len(runs)} runs: the estimate alone {uncalibrated}; "
          + "; ".join(f"from the checkpoint {back} back: gap {c['gap']}, ratio {c['ratio']}"
                      for back, c in summary.items()))


if __name__ == "__main__":
    main()
