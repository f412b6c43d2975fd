"""Benchmark: how well the model-latency forecast (:mod:`tunewise.forecast`) foretells replayed runs (no TVM
tuning; TVM is imported only to name this CPU).

    .venv/bin/python bench/forecast.py      # every trace in bench/traces; writes bench/results/current/forecast.json

Every committed trace is replayed with ``--scheduler`` (the default scheduler unless given; each recorded seed,
scheduler seeds ``--seeds``) under time
budgets of ``--budgets`` times the trace's recorded tuning time (each task at most the trials it recorded, as
it was recorded). At 10 %, 25 % and 50 % of each run's budget the forecast is made from the run's snapshot,
with each allocation rule, and compared with what the replay then did:

- coverage: how often the estimate at the budget's end, and at the half-way point between then and the end,
  falls inside the forecast's 80 % interval (goal 70-90 %);
- the median absolute relative error of the forecast median at the budget's end (goal within 10 %);
- the time to reach within 5 % of the final latency: the run's, against the first time the forecast median
  comes within 5 % of its own end value (median absolute relative error, in tuning time since the start, of
  the runs that had not got there yet; goal within 30 %); also in time from the moment of the forecast;
- give-up at 0.9: for goals 0.85, 0.95, 1.05 and 1.2 times the run's final estimate, how often the forecast
  said the goal is missed with probability >= 0.9 while the run reached it (goal under 10 %);
- cost: the forecast after every slot, as a run makes it (one refit per slot), over the slot's recorded
  time, on every trace's first seed (goal under 1 %).

Rows are grouped by the moment and by whether the forecast passes its own display gate
(:attr:`tunewise.forecast.Forecast.calibrated`). Writes ``--out`` (default ``bench/results/current/forecast.json``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import time

import provenance

from tunewise import replay as rp
from tunewise import schedulers
from tunewise.budget import Budget
from tunewise.forecast import ALLOCATIONS, Forecaster

MOMENTS = (0.10, 0.25, 0.50)
GOALS = (0.85, 0.95, 1.05, 1.20)
GIVE_UP = 0.9


def latency_at(history, t: float) -> float:
    """The run's estimate at tuning time ``t``: its last point at or before it."""
    return [v for when, v in history if when <= t][-1]


def converged(times, band, fraction: float = 0.05) -> float:
    """The first time at which ``band`` comes within ``fraction`` of its last value."""
    return next(t for t, v in zip(times, band, strict=True) if v <= (1 + fraction) * band[-1])


def replay_one(trace: rp.Trace, scheduler: str, seed_index: int, seed: int, share: float,
               spread: float) -> list[dict]:
    """One run: its forecasts at each moment (with each allocation), each compared with the outcome."""
    per_task = trace.meta.get("trials_per_task")
    budget = share * sum(sum(r.costs) for r in trace.runs[seed_index])
    run = rp.TraceRun(trace, schedulers.create_seeded(scheduler, seed), seed_index=seed_index, decision_cost=0.0,
                      budget=Budget(time_budget=budget, per_task_trials=per_task))
    forecasters = {a: Forecaster(allocation=a, spread=spread, seed=seed) for a in ALLOCATIONS}
    made = []
    for moment in MOMENTS:
        while run.elapsed < moment * budget and run.step():
            pass
        snapshot = run.ledger.snapshot()
        for allocation, forecaster in forecasters.items():
            made.append((moment, allocation, forecaster(snapshot, seconds_left=run.ledger.seconds_left())))
    while run.step():
        pass
    history = run.result().history
    final = history[-1][1]
    reached = rp.time_to_within(history, final, 0.05)
    rows = []
    for moment, allocation, f in made:
        if f is None:
            continue
        half = (f.elapsed + f.budget_end) / 2
        low, _, high = f.at(half)
        mid = latency_at(history, half)
        guess = converged(f.times, f.median)
        rows.append({
            "model": trace.model, "trace_seeds": trace.seeds, "seed_index": seed_index, "seed": seed,
            "budget_share": share, "moment": moment, "allocation": allocation, "calibrated": f.calibrated,
            "untried": f.untried, "untried_share": f.untried_share,
            "elapsed": f.elapsed, "now": f.median[0], "budget_end": f.budget_end, "final": final,
            "end": f.at_end(), "covered_end": f.at_end()[0] <= final <= f.at_end()[2],
            "covered_half": low <= mid <= high, "error_end": abs(f.at_end()[1] - final) / final,
            "converged": reached, "converged_forecast": guess,
            "error_converged": None if reached <= f.elapsed else abs(guess - reached) / reached,
            "error_converged_from_now": None if reached <= f.elapsed else
            abs(guess - reached) / (reached - f.elapsed),
            "give_up": [{"goal": g * final, "reached": final <= g * final,
                         "gave_up": 1 - f.probability_reached(g * final) >= GIVE_UP} for g in GOALS]})
    return rows


def cost(trace: rp.Trace, scheduler: str) -> dict:
    """Seconds of forecasting per slot, as a run forecasts after every slot, against the slots' recorded time."""
    spent = []

    class Timed(Forecaster):
        def __call__(self, snapshot, *, seconds_left):
            start = time.perf_counter()
            out = super().__call__(snapshot, seconds_left=seconds_left)
            spent.append(time.perf_counter() - start)
            return out

    per_task = trace.meta.get("trials_per_task")
    total = sum(sum(r.costs) for r in trace.runs[0])
    run = rp.TraceRun(trace, schedulers.create_seeded(scheduler, 0), seed_index=0, decision_cost=0.0,
                      budget=Budget(time_budget=total / 2, per_task_trials=per_task), forecaster=Timed(seed=0))
    while run.step():
        pass
    slot_seconds = run.elapsed / len(run.picks)
    return {"model": trace.model, "slots": len(run.picks), "forecast_ms_per_slot": 1e3 * statistics.mean(spent),
            "forecast_ms_max": 1e3 * max(spent), "slot_seconds": slot_seconds,
            "share_of_slot": statistics.mean(spent) / slot_seconds}


def summarise(rows: list[dict]) -> dict:
    def median(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    def share(values):
        values = list(values)
        return sum(values) / len(values) if values else None

    decisions = [g for r in rows for g in r["give_up"] if g["gave_up"]]
    return {"forecasts": len(rows),
            "coverage_end": share(r["covered_end"] for r in rows),
            "coverage_half": share(r["covered_half"] for r in rows),
            "median_error_end": median(r["error_end"] for r in rows),
            "median_error_converged": median(r["error_converged"] for r in rows),
            "median_error_converged_from_now": median(r["error_converged_from_now"] for r in rows),
            "converged_cases": sum(r["error_converged"] is not None for r in rows),
            "give_ups": len(decisions), "give_up_goals": sum(len(r["give_up"]) for r in rows),
            "give_up_wrong": share(g["reached"] for g in decisions)}


def groups(rows: list[dict]) -> dict:
    out = {}
    for allocation in ALLOCATIONS:
        mine = [r for r in rows if r["allocation"] == allocation]
        out[allocation] = {"all": summarise(mine),
                           "calibrated": summarise([r for r in mine if r["calibrated"]]),
                           **{f"at_{round(100 * m)}pct": summarise([r for r in mine if r["moment"] == m])
                              for m in MOMENTS},
                           **{f"at_{round(100 * m)}pct_calibrated":
                              summarise([r for r in mine if r["moment"] == m and r["calibrated"]]) for m in MOMENTS}}
    return out


def table(summary: dict) -> str:
    def pct(x):
        return "-" if x is None else f"{100 * x:.0f} %"

    head = (f"{'allocation / forecasts':34s} {'n':>4s} {'cover end':>9s} {'cover half':>10s} {'err end':>8s} "
            f"{'err to 5%':>9s} {'(from now)':>10s} {'give-ups':>8s} {'wrong':>6s}")
    lines = [head, "-" * len(head)]
    for allocation, parts in summary.items():
        for name, s in parts.items():
            lines.append(f"{allocation + ' ' + name:34s} {s['forecasts']:4d} {pct(s['coverage_end']):>9s} "
                         f"{pct(s['coverage_half']):>10s} {pct(s['median_error_end']):>8s} "
                         f"{pct(s['median_error_converged']):>9s} {pct(s['median_error_converged_from_now']):>10s} "
                         f"{s['give_ups']:8d} {pct(s['give_up_wrong']):>6s}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", default=sorted(glob.glob("bench/traces/*.json.gz")))
    parser.add_argument("--scheduler", default=schedulers.DEFAULT)
    parser.add_argument("--seeds", default="0", help="the scheduler's seeds, comma-separated")
    parser.add_argument("--budgets", default="0.33,0.67", help="time budgets, as shares of the recorded time")
    parser.add_argument("--spread", type=float, default=Forecaster().spread,
                        help="the forecaster's spread (default: its own)")
    parser.add_argument("--out", default="bench/results/current/forecast.json")
    args = parser.parse_args()

    from tunewise.target import host_cpu

    seeds = [int(s) for s in args.seeds.split(",")]
    shares = [float(b) for b in args.budgets.split(",")]
    rows, costs = [], []
    start = time.perf_counter()
    for path in args.traces:
        trace = rp.Trace.load(path)
        for seed_index in range(trace.seeds):
            for seed in seeds:
                for share in shares:
                    rows += [{**r, "trace": os.path.basename(path)}
                             for r in replay_one(trace, args.scheduler, seed_index, seed, share, args.spread)]
        costs.append({**cost(trace, args.scheduler), "trace": os.path.basename(path)})
        print(f"{path}: done ({time.perf_counter() - start:.0f}s)", flush=True)
    summary = groups(rows)
    text = table(summary)
    worst = max(c["share_of_slot"] for c in costs)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"provenance": {**provenance.stamp(), "cpu": host_cpu()}, "traces": args.traces,
                   "scheduler": args.scheduler, "seeds": seeds,
                   "budget_shares": shares, "spread": args.spread, "moments": list(MOMENTS), "give_up_at": GIVE_UP,
                   "goals_over_final": list(GOALS), "summary": summary, "cost": costs,
                   "cost_worst_share_of_slot": worst, "table": text, "rows": rows}, f, indent=1)
    print(text)
    print("forecast cost per slot: " + ", ".join(f"{c['trace']} {c['forecast_ms_per_slot']:.1f} ms "
                                                 f"({100 * c['share_of_slot']:.2f} %)" for c in costs))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
