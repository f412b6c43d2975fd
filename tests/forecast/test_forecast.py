"""The model-latency forecast: its bands, its queries, its allocation rules, its seeding, and the ledger's."""

import math

import numpy as np
import pytest

from tunewise.budget import Budget
from tunewise.forecast import END_LEVELS, CurveFit, Forecast, Forecaster
from tunewise.forecast import _allocation as allocation
from tunewise.lab.replay import TraceRun
from tunewise.lab.synthetic import synthetic
from tunewise.schedulers import RoundRobin
from tunewise.tuning.state import Snapshot, TaskView

# small fits: the tests' forecasts are cheap
FAST = {"fit": CurveFit(n_walkers=8, n_steps=40, burn_in=20), "samples": 64}


@pytest.fixture(scope="module")
def trace():
    return synthetic(n_tasks=3, trials=96, seeds=1, seed=2)


def run_for(trace, slots: int, forecaster=None, budget=None) -> TraceRun:
    run = TraceRun(trace, RoundRobin(), seed_index=0, decision_cost=0.0,
                   budget=budget or Budget(time_budget=150.0), forecaster=forecaster)
    for _ in range(slots):
        run.step()
    return run


def test_a_forecast_runs_from_the_estimate_now_to_the_budgets_end(trace):
    run = run_for(trace, 6)
    snapshot = run.ledger.snapshot()
    f = Forecaster(seed=0, **FAST)(snapshot, seconds_left=run.ledger.seconds_left())
    assert f.slot == 5 and f.elapsed == snapshot.elapsed and f.times[0] == snapshot.elapsed
    assert f.budget_end >= 150.0 > f.times[-2]  # the last slot started before the budget's end runs whole
    assert f.median[0] == pytest.approx(snapshot.estimated_latency())
    for band in (f.low, f.median, f.high):
        assert np.all(np.diff(band) <= 0)  # every sampled future only improves
    assert all(lo <= me <= hi for lo, me, hi in zip(f.low, f.median, f.high, strict=True))
    assert f.low[-1] < f.high[-1] and f.at_end() == (f.low[-1], f.median[-1], f.high[-1])
    assert list(f.end) == sorted(f.end) and f.end[2] <= f.low[-1] <= f.end[-3]  # 10 % between 5 % and 95 %


def test_a_forecast_depends_on_its_seed_and_snapshot_alone(trace):
    snapshot = run_for(trace, 6).ledger.snapshot()
    first = Forecaster(seed=1, **FAST)(snapshot, seconds_left=90.0)
    warm = Forecaster(seed=1, **FAST)
    warm(run_for(trace, 5).ledger.snapshot(), seconds_left=90.0)  # its fits of the earlier run are cached
    assert warm(snapshot, seconds_left=90.0) == first
    assert Forecaster(seed=2, **FAST)(snapshot, seconds_left=90.0) != first


def test_the_futures_make_the_forecast_of_any_spread_gain_scale_and_stall(trace):
    snapshot = run_for(trace, 6).ledger.snapshot()
    forecaster = Forecaster(seed=3, spread=0.4, gain_scale=1.5, stall=0.2, **FAST)
    futures = forecaster.futures(snapshot, seconds_left=90.0)
    assert futures.forecast(spread=0.4, gain_scale=1.5, stall=0.2) == forecaster(snapshot, seconds_left=90.0)
    now = snapshot.estimated_latency()
    assert futures.forecast(spread=0.5, gain_scale=1.0, stall=0.0).high[-1] < now
    # the 30 % of the futures with the lowest draws gain nothing: the 90 % quantile stays at the estimate now
    assert futures.forecast(spread=0.5, gain_scale=1.0, stall=0.3).high[-1] == pytest.approx(now)
    # a larger gain scale forecasts more gain
    assert (futures.forecast(spread=0.5, gain_scale=2.0, stall=0.0).median[-1]
            < futures.forecast(spread=0.5, gain_scale=1.0, stall=0.0).median[-1])


def test_after_a_whole_model_check_the_forecast_is_of_the_model(trace):
    import dataclasses

    snapshot = run_for(trace, 6).ledger.snapshot()
    checked = dataclasses.replace(snapshot, measured=((snapshot.elapsed, snapshot.estimated_latency() + 2e-3),))
    of_estimate = Forecaster(seed=0, **FAST)(snapshot, seconds_left=90.0)
    of_model = Forecaster(seed=0, **FAST)(checked, seconds_left=90.0)
    assert of_estimate.gap is None and of_model.gap == pytest.approx(2e-3)
    for band in ("low", "median", "high", "end"):
        assert getattr(of_model, band) == pytest.approx(tuple(v + 2e-3 for v in getattr(of_estimate, band)))
    assert of_model.summary().startswith("~") and " ms in the model at budget end (80 %: " in of_model.summary()
    assert " in the model" not in of_estimate.summary()
    assert Forecast.from_json(of_model.to_json()) == of_model


def test_nothing_to_forecast_from_gives_none(trace):
    assert Forecaster(seed=0, **FAST)(run_for(trace, 0).ledger.snapshot(), seconds_left=60.0) is None
    unbounded = run_for(trace, 3, budget=Budget()).ledger.snapshot()
    assert Forecaster(seed=0, **FAST)(unbounded) is None
    assert Forecaster(seed=0, **FAST)(unbounded, seconds_left=60.0) is not None


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown allocation 'fair'; valid: greedy, recent"):
        Forecaster(allocation="fair")
    with pytest.raises(ValueError, match="spread must be >= 0"):
        Forecaster(spread=-1.0)
    with pytest.raises(ValueError, match="samples must be an integer >= 10"):
        Forecaster(samples=3)
    with pytest.raises(ValueError, match="gain_scale must be > 0"):
        Forecaster(gain_scale=0.0)
    with pytest.raises(ValueError, match=r"stall must be in \[0, 1\)"):
        Forecaster(stall=1.0)


def test_the_ledger_forecasts_after_every_slot_and_the_snapshot_carries_it(trace):
    run = run_for(trace, 4, forecaster=Forecaster(seed=0, **FAST))
    forecast = run.ledger.snapshot().forecast
    assert forecast is run.ledger.forecast and forecast.slot == 3
    run.step()
    assert run.ledger.snapshot().forecast.slot == 4


def test_a_whole_model_check_makes_the_ledgers_forecast_again_of_the_model(trace):
    run = run_for(trace, 4, forecaster=Forecaster(seed=0, **FAST))
    assert run.ledger.forecast.gap is None
    run.ledger.tell_model_latency(run.ledger.snapshot().estimated_latency() + 2e-3)
    assert run.ledger.forecast.gap == pytest.approx(2e-3) and run.ledger.forecast.slot == 3


def test_queries_read_the_band():
    f = Forecast(2, 20.0, (20.0, 30.0, 40.0), (9e-3, 6e-3, 5e-3), (9e-3, 8e-3, 6e-3), (9e-3, 9e-3, 8e-3),
                 tuple(5e-3 + 3e-3 * q for q in END_LEVELS), goal=6e-3)
    assert f.fraction == 0.5 and f.calibrated
    assert not Forecast(**{**vars(f), "elapsed": 19.0}).calibrated  # under half the budget spent
    # untried tasks holding 5 % of the estimate leave it calibrated, 6 % or a failed untuned schedule do not
    assert Forecast(**{**vars(f), "untried": 2, "untried_share": 0.05}).calibrated
    assert not Forecast(**{**vars(f), "untried": 2, "untried_share": 0.06}).calibrated
    assert not Forecast(**{**vars(f), "untried": 1, "untried_share": math.inf}).calibrated
    assert f.at(35.0) == (6e-3, 8e-3, 9e-3) and f.time_to(6e-3) == (30.0, 40.0, math.inf)
    assert f.probability_reached(6.5e-3) == pytest.approx(0.5) and f.probability_reached(1e-3) == 0.0
    assert f.goal_summary() == "goal 6 ms in ~20s (80 %: 10s-never)"
    assert f.line() == f"{f.summary()}; goal 6 ms in ~20s (80 %: 10s-never)"
    assert Forecast(**{**vars(f), "goal": None}).line() == f.summary()
    assert Forecast.from_json(f.to_json()) == f
    failed = Forecast(**{**vars(f), "untried": 1, "untried_share": math.inf})
    assert Forecast.from_json(failed.to_json()) == failed
    # stored before the share was: none when every task was measured, else unknown
    old = {k: v for k, v in Forecast(**{**vars(f), "untried": 1}).to_json().items() if k != "untried_share"}
    assert Forecast.from_json(old).untried_share == math.inf and not Forecast.from_json(old).calibrated


def test_greedy_gives_each_slot_to_the_largest_expected_drop():
    gains = [np.array([10.0, 6.0, 5.0]), np.array([8.0, 5.0, 4.5, 4.4])]  # drops 4, 1 and 3, 0.5, 0.1
    taken = allocation.greedy(gains, 6)
    assert taken[:, -1].tolist() == [2, 3]  # both run out: the last slot goes to nobody
    assert [int(np.flatnonzero(np.diff(taken[:, r - 1:r + 1]))[0]) for r in range(1, 6)] == [0, 1, 0, 1, 1]


def test_recent_follows_the_shares_and_passes_a_capped_tasks_on():
    taken = allocation.recent(np.array([0.75, 0.25]), np.array([100, 100]), 8)
    assert taken[:, -1].tolist() == [6, 2]
    assert allocation.recent(np.array([0.75, 0.25]), np.array([1, 100]), 8)[:, -1].tolist() == [1, 7]


def test_a_task_without_a_curve_borrows_the_measured_tasks_futures():
    measured = TaskView(0, "conv", 1, 1e9, 10e-3, (6e-3, 5e-3, 4.5e-3, 4.2e-3), (16, 32, 48, 64), 64,
                        slot_numbers=(0, 1, 2, 3),
                        trial_bests=tuple(10e-3 / (1 + 1.5 * (1 - math.exp(-j / 20))) for j in range(1, 65)))
    fresh = TaskView(1, "dense", 1, 1e9, 10e-3)
    snapshot = Snapshot((measured, fresh), elapsed=64.0, trials=64, slot=4)
    f = Forecaster(seed=0, **FAST)(snapshot, seconds_left=64.0)
    assert f.untried == 1 and f.untried_share == pytest.approx(10 / 14.2) and not f.calibrated
    assert f.median[-1] < snapshot.estimated_latency() - 2e-3  # the fresh task is expected to improve too


def test_a_resumed_run_is_forecast_once_after_its_stored_slots(trace):
    from tunewise import stores
    from tunewise.stores import Checkpoint, StoredTrial
    from tunewise.tuning.ledger import Ledger

    store = stores.create("sqlite://")
    run = store.create_run("m", "cpu", "round-robin", {})
    w = store.commit_workload("0000000000000001", "W", lambda other: other == "W")
    record = '[[[["GetSBlock", [], ["root", "main"], ["b0"]]], []], null, null, null]'
    for slot in range(6):
        task = slot % 3
        latencies = trace.runs[0][task].latencies[slot // 3 * 4:slot // 3 * 4 + 4]
        store.add_trials(run, [StoredTrial(w, record, (x,), task=task, slot=slot) for x in latencies],
                         Checkpoint(slot, task, 4, 10.0 * (slot + 1), 10.0, 1.0))
    made = []

    class Counted(Forecaster):
        def __call__(self, snapshot, **kwargs):
            made.append(snapshot.elapsed)
            return super().__call__(snapshot, **kwargs)

    ledger = Ledger(trace.tasks, RoundRobin(), Budget(time_budget=120.0), trials_per_slot=4, clock=lambda: 0.0,
                    forecaster=Counted(seed=0, **FAST))
    ledger.restore(store, run)
    assert made == [60.0] and ledger.forecast.slot == 5 and ledger.forecast.elapsed == 60.0
