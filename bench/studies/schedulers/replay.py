"""Benchmark: every task scheduler and the hindsight oracle replayed on recorded traces (no TVM).

Record the traces first (``bench/record_traces.py``), then::

    .venv/bin/python bench/studies/schedulers/replay.py bench/traces/resnet18.json.gz \
        --out bench/results/resnet18-replay

Each scheduler runs once per recorded seed, as :func:`tunewise.lab.replay.replay` simulates the session (16
trials per slot by default, the scheduler's seed = the seed index), until every recorded trial is used or
``--trials`` are spent. Its decision time is measured and charged (the oracles' too, though hindsight is not
a real cost). ``sequential`` gets a per-task budget of ``ceil(budget / tasks)``, the budget being ``--trials``
or every recorded trial, as AutoTVM did; ``--per-task`` and ``--patience`` apply to every scheduler.
``oracle`` is DynaTune's one-slot greedy oracle, ``oracle-lookahead`` the one that looks any number of slots
ahead (see :class:`tunewise.lab.oracles.Oracle`), ``oracle-other-seeds`` the one-slot greedy that reads the trace's
other seeds instead of the replayed one (:class:`tunewise.lab.oracles.OtherSeedsOracle`: a perfect belief without
foresight; left out, with a message, on a one-seed trace), ``oracle-other-seeds-lookahead`` the same belief
looking any number of slots ahead.

For each seed, the goal is the best reachable model latency (each task at its best recorded trial); the
table gives each scheduler's time to come within 5 % and 1 % of it (median over seeds [min-max]; "-" when
not reached) and the ratio of its median to gradient's, to the oracle's and to the clairvoyant bound's
(below 1 is faster). The bound (:func:`tunewise.lab.oracles.fastest_allocation`, last row) is the recorded
cost of the cheapest whole-slot prefixes that reach the goal: no scheduler reaches it sooner, so gradient's
time over the bound's is the most any scheduler could gain on gradient. Decision times are given a slot and as
a share of the replayed tuning time. A second table shows the way
there: the median time to within 100 % (twice the best), 25 %, 10 % and 5 %. Writes ``OUT.json`` (settings,
per-seed curves and times, bounds, summary) and ``OUT.png`` (model latency over the best reachable against
tuning time, median over seeds, the bound's median times marked on the goal lines).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

import numpy as np

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import infinity, schedulers
from tunewise.budget import Budget
from tunewise.lab import oracles
from tunewise.lab import replay as rp

SCHEDULERS = ["sequential", "round-robin", "random", "flops", "gradient", "gated-gradient", "dynatune",
              "dynatune-egreedy", "dynatune-softmax", "expected-gain", "oracle", "oracle-lookahead",
              "oracle-other-seeds", "oracle-other-seeds-lookahead"]
GOALS = (0.05, 0.01)
EARLY_GOALS = (1.0, 0.25, 0.10)  # the way there: a second, smaller table


def time_key(goal: float) -> str:
    """The JSON key of the time to within ``goal`` (a fraction): ``time_to_5pct`` for 0.05."""
    return f"time_to_{round(100 * goal)}pct"


def build(name: str, trace: rp.Trace, seed: int):
    if name == "oracle":
        return oracles.Oracle(trace=trace, seed_index=seed)
    if name == "oracle-lookahead":
        return oracles.Oracle(trace=trace, seed_index=seed, lookahead=None)
    if name == "oracle-other-seeds":
        return oracles.OtherSeedsOracle(trace=trace, seed_index=seed)
    if name == "oracle-other-seeds-lookahead":
        return oracles.OtherSeedsOracle(trace=trace, seed_index=seed, lookahead=None)
    return schedulers.create_seeded(name, seed)


def run_all(trace: rp.Trace, names: list[str], args) -> dict:
    recorded = sum(len(r.latencies) for r in trace.runs[0])
    budget = args.trials or recorded
    runs: dict[str, list[dict]] = {}
    for name in names:
        if name.startswith("oracle-other-seeds") and trace.seeds < 2:
            print(f"{name}: left out, the trace has one seed", flush=True)
            continue
        per_task = args.per_task or (math.ceil(budget / len(trace.tasks)) if name == "sequential" else None)
        runs[name] = []
        for seed in range(trace.seeds):
            run = rp.replay(trace, build(name, trace, seed), seed_index=seed, trials_per_slot=args.trials_per_slot,
                            budget=Budget(max_trials=args.trials, per_task_trials=per_task, patience=args.patience))
            best = trace.best_reachable(seed)
            runs[name].append({"seed": seed, "curve": [list(p) for p in run.history], "slots": len(run.picks),
                               "trials": run.final.trials, "decision_seconds": sum(run.decision_times),
                               "final_latency": run.history[-1][1],
                               **{time_key(g): rp.time_to_within(run.history, best, g)
                                  for g in GOALS + EARLY_GOALS}})
        print(f"{name}: done", flush=True)
    return runs


def bounds(trace: rp.Trace, args) -> list[dict]:
    """Per seed, :func:`tunewise.lab.oracles.fastest_allocation` for each goal: its seconds and trials per task."""
    out = []
    for seed in range(trace.seeds):
        best = trace.best_reachable(seed)
        found = {g: oracles.fastest_allocation(trace, (1 + g) * best, seed_index=seed,
                                               trials_per_slot=args.trials_per_slot)
                 for g in GOALS + EARLY_GOALS}
        out.append({"seed": seed, **{time_key(g): a.seconds for g, a in found.items()},
                    **{f"trials_to_{round(100 * g)}pct": list(a.trials) for g, a in found.items()}})
    return out


def spread(values: list[float | None]) -> dict:
    """Median, min and max, counting "never" (``None``) as infinitely late, and reported as ``None``."""
    xs = sorted(math.inf if v is None else v for v in values)
    return {k: infinity.to_json(v)
            for k, v in (("median", statistics.median(xs)), ("min", xs[0]), ("max", xs[-1]))}


def summarise(runs: dict, bound: list[dict]) -> dict:
    keys = [time_key(g) for g in GOALS + EARLY_GOALS]
    summary = {name: {key: spread([r[key] for r in seeds]) for key in keys} for name, seeds in runs.items()}
    for name, s in summary.items():
        s["decision_ms_per_slot"] = 1e3 * sum(r["decision_seconds"] for r in runs[name]) / max(
            sum(r["slots"] for r in runs[name]), 1)
        s["decision_share"] = sum(r["decision_seconds"] for r in runs[name]) / max(
            sum(r["curve"][-1][0] for r in runs[name]), 1e-9)
    summary["bound"] = {key: spread([b[key] for b in bound]) for key in keys}
    for s in summary.values():
        for ref in ("gradient", "oracle", "bound"):
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

    def ratios(s: dict, ref: str) -> str:
        vs = s.get(f"vs_{ref}", {})
        return ratio(vs.get("time_to_5pct")) + "/" + ratio(vs.get("time_to_1pct"))

    head = (f"{'scheduler':28s} {'to 5 % (s)':>18s} {'to 1 % (s)':>18s} {'x gradient':>12s} {'x oracle':>12s}"
            f" {'x bound':>12s} {'decide ms/slot':>15s} {'% of time':>10s}")
    lines = [head, "-" * len(head)]
    for name, s in summary.items():
        decide = (f"{s['decision_ms_per_slot']:15.2f} {100 * s['decision_share']:10.3f}" if "decision_share" in s
                  else f"{'-':>15s} {'-':>10s}")
        lines.append(f"{name:28s} {fmt(s['time_to_5pct']):>18s} {fmt(s['time_to_1pct']):>18s} "
                     f"{ratios(s, 'gradient'):>12s} {ratios(s, 'oracle'):>12s} {ratios(s, 'bound'):>12s} {decide}")
    goals = EARLY_GOALS + GOALS[:1]
    head = f"{'median s to within':28s} " + " ".join(f"{f'{round(100 * g)} %':>8s}" for g in goals)
    lines += ["", head, "-" * len(head)]
    for name, s in summary.items():
        times = (s[time_key(g)]["median"] for g in goals)
        lines.append(f"{name:28s} " + " ".join(f"{'-' if t is None else f'{t:.0f}':>8s}" for t in times))
    return "\n".join(lines)


def plot(trace: rp.Trace, runs: dict, summary: dict, path: str) -> None:
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
        at = summary["bound"][time_key(goal)]["median"]
        ax.plot([at], [1 + goal], marker="|", markersize=14, color="black",
                label="clairvoyant bound" if goal == GOALS[0] else None)
    ax.set_xlabel("tuning time (s, replayed)")
    ax.set_ylabel("model latency / best reachable (median over seeds)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%.2f"))
    low, high = ax.get_ylim()
    if high / low < 10:  # within a decade the minor ticks are the only labels; beyond, they crowd the axis
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
    bound = bounds(trace, args)
    summary = summarise(runs, bound)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump({"provenance": provenance.stamp(), "trace": args.trace, "model": trace.model, "meta": trace.meta,
                   "settings": {k: v for k, v in vars(args).items() if k != "trace"},
                   "best_reachable": [trace.best_reachable(s) for s in range(trace.seeds)],
                   "bounds": bound, "summary": summary, "runs": runs}, f, indent=1)
    plot(trace, runs, summary, out + ".png")
    print(table(summary))
    print(f"wrote {out}.json and {out}.png")


if __name__ == "__main__":
    main()
