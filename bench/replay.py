"""Benchmark: every task scheduler and the hindsight oracle replayed on recorded traces (no TVM).

Record the traces first (``bench/record_traces.py``), then::

    .venv/bin/python bench/replay.py bench/traces/resnet18.json.gz --out bench/results/resnet18-replay

Each scheduler runs once per recorded seed, as :func:`tunewise.replay.replay` simulates the session (16
trials per slot by default, the scheduler's seed = the seed index), until every recorded trial is used or
``--trials`` are spent. Its decision time is measured and charged (the oracles' too, though hindsight is not
a real cost). ``sequential`` gets a per-task budget of ``ceil(budget / tasks)``, the budget being ``--trials``
or every recorded trial, as AutoTVM did; ``--per-task`` and ``--patience`` apply to every scheduler.
``oracle`` is DynaTune's one-slot greedy oracle, ``oracle-lookahead`` the one that looks any number of slots
ahead (see :class:`tunewise.replay.Oracle`).

For each seed, the goal is the best reachable model latency (each task at its best recorded trial); the
table gives each scheduler's time to come within 5 % and 1 % of it (median over seeds [min-max]; "-" when
not reached) and the ratio of its median to gradient's and to the oracle's (below 1 is faster). Writes
``OUT.json`` (settings, per-seed curves and times, summary) and ``OUT.png`` (model latency over the best
reachable against tuning time, median over seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics

import numpy as np

from tunewise import replay as rp
from tunewise import schedulers

SCHEDULERS = ["sequential", "round-robin", "random", "flops", "gradient", "dynatune", "dynatune-egreedy",
              "dynatune-softmax", "oracle", "oracle-lookahead"]
GOALS = (0.05, 0.01)


def build(name: str, trace: rp.Trace, seed: int):
    if name == "oracle":
        return rp.Oracle(trace=trace, seed_index=seed)
    if name == "oracle-lookahead":
        return rp.Oracle(trace=trace, seed_index=seed, lookahead=None)
    return schedulers.create_seeded(name, seed)


def run_all(trace: rp.Trace, names: list[str], args) -> dict:
    recorded = sum(len(r.latencies) for r in trace.runs[0])
    budget = args.trials or recorded
    runs: dict[str, list[dict]] = {}
    for name in names:
        per_task = args.per_task or (math.ceil(budget / len(trace.tasks)) if name == "sequential" else None)
        runs[name] = []
        for seed in range(trace.seeds):
            run = rp.replay(trace, build(name, trace, seed), seed_index=seed, trials_per_slot=args.trials_per_slot,
                            max_trials=args.trials, per_task_trials=per_task, patience=args.patience)
            best = trace.best_reachable(seed)
            runs[name].append({"seed": seed, "curve": [list(p) for p in run.history], "slots": len(run.picks),
                               "trials": run.final.trials, "decision_seconds": sum(run.decision_times),
                               "final_latency": run.history[-1][1],
                               **{f"time_to_{round(100 * g)}pct": rp.time_to_within(run.history, best, g)
                                  for g in GOALS}})
        print(f"{name}: done", flush=True)
    return runs


def spread(values: list[float | None]) -> dict:
    """Median, min and max, counting "never" (``None``) as infinitely late, and reported as ``None``."""
    xs = sorted(math.inf if v is None else v for v in values)
    return {k: v if math.isfinite(v) else None
            for k, v in (("median", statistics.median(xs)), ("min", xs[0]), ("max", xs[-1]))}


def summarise(runs: dict) -> dict:
    summary = {name: {key: spread([r[key] for r in seeds]) for key in (f"time_to_{round(100 * g)}pct" for g in GOALS)}
               for name, seeds in runs.items()}
    for name, s in summary.items():
        s["decision_ms_per_slot"] = 1e3 * sum(r["decision_seconds"] for r in runs[name]) / max(
            sum(r["slots"] for r in runs[name]), 1)
        for ref in ("gradient", "oracle"):
            if ref in summary:
                s[f"vs_{ref}"] = {key: _ratio(s[key]["median"], summary[ref][key]["median"])
                                  for key in s if key.startswith("time_to")}
    return summary


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def table(summary: dict) -> str:
    def fmt(s: dict) -> str:
        if s["median"] is None:
            return "-"
        top = "-" if s["max"] is None else f"{s['max']:.0f}"
        return f"{s['median']:.0f} [{s['min']:.0f}-{top}]"

    def ratio(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    head = (f"{'scheduler':18s} {'to 5 % (s)':>18s} {'to 1 % (s)':>18s} {'x gradient':>12s} {'x oracle':>12s}"
            f" {'decide ms/slot':>15s}")
    lines = [head, "-" * len(head)]
    for name, s in summary.items():
        vs_g, vs_o = s.get("vs_gradient", {}), s.get("vs_oracle", {})
        lines.append(f"{name:18s} {fmt(s['time_to_5pct']):>18s} {fmt(s['time_to_1pct']):>18s} "
                     f"{ratio(vs_g.get('time_to_5pct')) + '/' + ratio(vs_g.get('time_to_1pct')):>12s} "
                     f"{ratio(vs_o.get('time_to_5pct')) + '/' + ratio(vs_o.get('time_to_1pct')):>12s} "
                     f"{s['decision_ms_per_slot']:15.2f}")
    return "\n".join(lines)


def plot(trace: rp.Trace, runs: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter

    end = max(r["curve"][-1][0] for seeds in runs.values() for r in seeds)
    grid = np.linspace(0.0, end, 400)
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for name, seeds in runs.items():
        ratios = []
        for r in seeds:
            times, latencies = np.array(r["curve"]).T
            at = np.searchsorted(times, grid, side="right") - 1  # the curve is a step function
            ratios.append(latencies[at] / trace.best_reachable(r["seed"]))
        ax.step(grid, np.median(ratios, axis=0), where="post", label=name,
                linestyle="--" if name.startswith("oracle") else "-")
    for goal in GOALS:
        ax.axhline(1 + goal, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("tuning time (s, replayed)")
    ax.set_ylabel("model latency / best reachable (median over seeds)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%.2f"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%.2f"))
    ax.set_title(f"{trace.model}: {len(trace.tasks)} tasks, {trace.seeds} seed(s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="a trace written by bench/record_traces.py")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS))
    parser.add_argument("--trials", type=int, default=None, help="total trial budget (default: all recorded)")
    parser.add_argument("--per-task", type=int, default=None)
    parser.add_argument("--patience", type=int, default=None)
    parser.add_argument("--trials-per-slot", type=int, default=16)
    parser.add_argument("--out", default=None, help="default: bench/results/MODEL-replay")
    args = parser.parse_args()

    import scipy.optimize  # noqa: F401  (the belief's import, paid once, not by whichever DynaTune runs first)

    trace = rp.Trace.load(args.trace)
    out = args.out or os.path.join("bench", "results", f"{trace.model}-replay")
    runs = run_all(trace, args.schedulers.split(","), args)
    summary = summarise(runs)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump({"trace": args.trace, "model": trace.model, "meta": trace.meta,
                   "settings": {k: v for k, v in vars(args).items() if k != "trace"},
                   "best_reachable": [trace.best_reachable(s) for s in range(trace.seeds)],
                   "summary": summary, "runs": runs}, f, indent=1)
    plot(trace, runs, out + ".png")
    print(table(summary))
    print(f"wrote {out}.json and {out}.png")


if __name__ == "__main__":
    main()
