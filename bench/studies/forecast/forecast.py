"""Benchmark: how well the model-latency forecast (:mod:`tunewise.forecast`) foretells replayed runs, with its
spread, gain scale and display gate chosen on some models and judged on another (no TVM tuning; TVM is
imported only to name this CPU).

    .venv/bin/python bench/studies/forecast/forecast.py      # every trace in bench/traces; writes \
        bench/studies/forecast/results/forecast.json

Every committed trace is replayed with ``--scheduler`` (the default scheduler unless given; each recorded seed,
scheduler seeds ``--seeds``) under time budgets of ``--budgets`` times the trace's recorded tuning time (each
task at most the trials it recorded, as it was recorded). At 10 %, 25 %, 50 % and 75 % of each run's budget
the forecast's sampled futures are drawn from the run's snapshot (:meth:`tunewise.forecast.Forecaster.futures`),
with each allocation rule, and every forecast of the grid of spreads, gain scales and stalls is made from them and
compared with what the replay then did:

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

A forecast is *shown* where it passes the display gate (:attr:`tunewise.forecast.Forecast.calibrated`: at least
a share of the budget spent, the tasks without a valid measurement holding at most 5 % of the estimate). The
spread, the gain scale, the stall and the gate's share are chosen together (:func:`choose`): the shown
forecasts' coverage nearest 75-85 % (end and half-way), with give-ups wrong under 10 %, then the most shown. Out of
sample: leave one model out, choose on the other models' runs, judge the held-out model's runs with that
choice, and pool the held-out verdicts. The choice on every model is the forecaster's default (the run says
whether the defaults still match it, and judges the defaults too). Writes ``--out`` (default
``bench/studies/forecast/results/forecast.json``).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, BENCH)  # bench/: provenance and the helpers the benchmarks share

import provenance

from tunewise import schedulers
from tunewise.budget import Budget
from tunewise.forecast import ALLOCATIONS, GAIN_SCALE, MAX_UNTRIED_SHARE, MIN_FRACTION, SPREAD, STALL, Forecaster
from tunewise.lab import replay as rp

MOMENTS = (0.10, 0.25, 0.50, 0.75)
GOALS = (0.85, 0.95, 1.05, 1.20)
GIVE_UP = 0.9
SPREADS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
GAIN_SCALES = (1.0, 1.25, 1.5, 2.0, 2.5)
STALLS = (0.0, 0.15, 0.3)
MIN_FRACTIONS = (0.5, 0.75)  # from a quarter of the budget, give-ups at 0.9 were wrong 19-25 % of the time
COVERAGE = (0.75, 0.85)  # the coverage a choice aims at: inside the 70-90 % goal, with a margin


def latency_at(history, t: float) -> float:
    """The run's estimate at tuning time ``t``: its last point at or before it."""
    return [v for when, v in history if when <= t][-1]


def converged(times, band, fraction: float = 0.05) -> float:
    """The first time at which ``band`` comes within ``fraction`` of its last value."""
    return next(t for t, v in zip(times, band, strict=True) if v <= (1 + fraction) * band[-1])


def params_key(spread: float, gain_scale: float, stall: float) -> str:
    return f"{spread:g}x{gain_scale:g}s{stall:g}"


def judged(f, history, final: float, reached: float) -> dict:
    """What forecast ``f`` said against what the run did."""
    half = (f.elapsed + f.budget_end) / 2
    low, _, high = f.at(half)
    mid = latency_at(history, half)
    guess = converged(f.times, f.median)
    return {"end": f.at_end(), "covered_end": f.at_end()[0] <= final <= f.at_end()[2],
            "covered_half": low <= mid <= high, "error_end": abs(f.at_end()[1] - final) / final,
            "converged_forecast": guess,
            "error_converged": None if reached <= f.elapsed else abs(guess - reached) / reached,
            "error_converged_from_now": None if reached <= f.elapsed else abs(guess - reached) / (reached - f.elapsed),
            "give_up": [{"goal": g * final, "reached": final <= g * final,
                         "gave_up": 1 - f.probability_reached(g * final) >= GIVE_UP} for g in GOALS]}


def replay_one(trace: rp.Trace, scheduler: str, seed_index: int, seed: int, share: float) -> list[dict]:
    """One run: its forecasts at each moment (with each allocation, each spread, gain scale and stall of the
    grid), each compared with the outcome; ``row["by"][params_key(spread, gain_scale, stall)]`` holds one."""
    per_task = trace.meta.get("trials_per_task")
    budget = share * sum(sum(r.costs) for r in trace.runs[seed_index])
    run = rp.TraceRun(trace, schedulers.create_seeded(scheduler, seed), seed_index=seed_index, decision_cost=0.0,
                      budget=Budget(time_budget=budget, per_task_trials=per_task))
    forecasters = {a: Forecaster(allocation=a, seed=seed) for a in ALLOCATIONS}
    made = []
    for moment in MOMENTS:
        while run.elapsed < moment * budget and run.step():
            pass
        snapshot = run.ledger.snapshot()
        for allocation, forecaster in forecasters.items():
            futures = forecaster.futures(snapshot, seconds_left=run.ledger.seconds_left())
            if futures is not None:
                made.append((moment, allocation, {
                    params_key(s, g, z): futures.forecast(spread=s, gain_scale=g, stall=z)
                    for s in SPREADS for g in GAIN_SCALES for z in STALLS}))
    while run.step():
        pass
    history = run.result().history
    final = history[-1][1]
    reached = rp.time_to_within(history, final, 0.05)
    rows = []
    for moment, allocation, grid in made:
        f = next(iter(grid.values()))
        rows.append({
            "model": trace.model, "trace_seeds": trace.seeds, "seed_index": seed_index, "seed": seed,
            "budget_share": share, "moment": moment, "allocation": allocation, "fraction": f.fraction,
            "untried": f.untried, "untried_share": f.untried_share,
            "elapsed": f.elapsed, "now": f.median[0], "budget_end": f.budget_end, "final": final,
            "converged": reached, "by": {k: judged(g, history, final, reached) for k, g in grid.items()}})
    return rows


def shown(row: dict, min_fraction: float) -> bool:
    """Whether the forecast of ``row`` passes the display gate with a share ``min_fraction`` of the budget."""
    return row["fraction"] >= min_fraction and row["untried_share"] <= MAX_UNTRIED_SHARE


def verdicts(rows: list[dict], choice: dict) -> list[dict]:
    """The rows with the verdicts of ``choice``'s spread, gain scale and stall, each marked shown or not by its
    gate."""
    key = params_key(choice["spread"], choice["gain_scale"], choice["stall"])
    return [{**{k: v for k, v in r.items() if k != "by"}, **r["by"][key], **choice,
             "calibrated": shown(r, choice["min_fraction"])} for r in rows]


def choose(rows: list[dict]) -> dict:
    """The spread, gain scale, stall and gate share whose shown forecasts among ``rows`` come nearest the
    :data:`COVERAGE` aim (end and half-way) with give-ups wrong under 10 %, then show the most forecasts,
    then have the smallest median error at the budget's end."""
    def score(choice):
        s = summarise([r for r in verdicts(rows, choice) if r["calibrated"]])
        if not s["forecasts"]:
            return (True, math.inf, 0, math.inf)
        off = sum(max(0.0, COVERAGE[0] - c, c - COVERAGE[1]) for c in (s["coverage_end"], s["coverage_half"]))
        wrong = s["give_up_wrong"] is not None and s["give_up_wrong"] >= 0.10
        return (wrong, round(off, 3), -s["forecasts"], s["median_error_end"])

    grid = [{"spread": s, "gain_scale": g, "stall": z, "min_fraction": m}
            for s in SPREADS for g in GAIN_SCALES for z in STALLS for m in MIN_FRACTIONS]
    return min(grid, key=score)


def out_of_sample(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Leave one model out: each model's rows judged with the choice made on the other models' rows; returns
    the pooled verdicts and the choice per held-out model."""
    judged_rows, choices = [], []
    for model in sorted({r["model"] for r in rows}):
        choice = choose([r for r in rows if r["model"] != model])
        choices.append({"held_out": model, **choice})
        judged_rows += verdicts([r for r in rows if r["model"] == model], choice)
    return judged_rows, choices


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
    parser.add_argument("--out", default="bench/studies/forecast/results/forecast.json")
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
                             for r in replay_one(trace, args.scheduler, seed_index, seed, share)]
        costs.append({**cost(trace, args.scheduler), "trace": os.path.basename(path)})
        print(f"{path}: done ({time.perf_counter() - start:.0f}s)", flush=True)
    # each allocation rule is chosen and judged on its own forecasts
    held_out, folds, in_sample, chosen = [], {}, [], {}
    for allocation in ALLOCATIONS:
        mine = [r for r in rows if r["allocation"] == allocation]
        judged_rows, folds[allocation] = out_of_sample(mine)
        held_out += judged_rows
        chosen[allocation] = choose(mine)
        in_sample += verdicts(mine, chosen[allocation])
    defaults = {"spread": SPREAD, "gain_scale": GAIN_SCALE, "stall": STALL, "min_fraction": MIN_FRACTION}
    summary = {"out_of_sample": groups(held_out), "in_sample": groups(in_sample),
               "defaults": groups(verdicts(rows, defaults))}
    text = ("out of sample (each model judged with the choice made on the others):\n"
            + table(summary["out_of_sample"]) + "\n\nin sample (the choice made on every model):\n"
            + table(summary["in_sample"]) + "\n\nthe forecaster's defaults:\n" + table(summary["defaults"]))
    worst = max(c["share_of_slot"] for c in costs)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"provenance": {**provenance.stamp(), "cpu": host_cpu()}, "traces": args.traces,
                   "scheduler": args.scheduler, "seeds": seeds, "budget_shares": shares, "moments": list(MOMENTS),
                   "give_up_at": GIVE_UP, "goals_over_final": list(GOALS),
                   "grid": {"spreads": list(SPREADS), "gain_scales": list(GAIN_SCALES), "stalls": list(STALLS),
                            "min_fractions": list(MIN_FRACTIONS), "coverage_aim": list(COVERAGE)},
                   "chosen": chosen, "defaults": defaults, "folds": folds, "summary": summary, "cost": costs,
                   "cost_worst_share_of_slot": worst, "table": text, "rows_out_of_sample": held_out}, f, indent=1)
    print(text)
    print("forecast cost per slot: " + ", ".join(f"{c['trace']} {c['forecast_ms_per_slot']:.1f} ms "
                                                 f"({100 * c['share_of_slot']:.2f} %)" for c in costs))
    print("chosen on every model: " + ", ".join(f"{a} {c}" for a, c in chosen.items()))
    if chosen["greedy"] != defaults:
        print(f"the forecaster's defaults {defaults} differ from the choice: update them")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
