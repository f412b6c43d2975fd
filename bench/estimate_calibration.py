"""How well a whole-model check brings the estimate to the compiled model, on recorded runs.

::

    .venv/bin/python bench/estimate_calibration.py bench/results/current/scheduler-runs-*.json \\
        --out bench/results/current/estimate-calibration.json

Reads ``bench/scheduler_runs.py`` results: per run, the model compiled and timed at checkpoints and at the end,
and the estimate after every slot. For every checkpoint before the end, it predicts the final compiled latency
from the final estimate as :func:`tunewise.estimate.calibrated_latency` does (the gap the checkpoint measured,
added), and as a ratio would (the estimate scaled by what the checkpoint measured over the estimate then), and
reports each prediction over the final compiled latency: 1.0 is exact. The last line counts, per checkpoint
age, the runs predicted within 1.1x, with the uncalibrated estimate's count beside.
"""

from __future__ import annotations

import argparse
import bisect
import json
from collections import defaultdict

import provenance

from tunewise.estimate import calibrated_latency


def predictions(run: dict) -> list[dict]:
    """Per checkpoint before the end: its tuning time and what the gap and the ratio predict, over the final
    compiled latency."""
    curve = [tuple(point) for point in run["estimate"]]
    times = [t for t, _ in curve]
    (*checks, (end, final)) = [tuple(point) for point in run["compiled"]]
    estimate = curve[-1][1]
    rows = []
    for at, latency in checks:
        then = curve[max(0, bisect.bisect_right(times, at) - 1)][1]
        rows.append({"check_s": at, "before_end_s": end - at,
                     "gap": calibrated_latency(estimate, curve, [(at, latency)]) / final,
                     "ratio": estimate * latency / then / final})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="bench/scheduler_runs.py result files")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

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
