"""Giving up on a latency goal the forecast says is out of reach, on synthetic traces."""

import pytest

from tunewise import stoppers
from tunewise.budget import Budget
from tunewise.errors import InputError
from tunewise.forecast import END_LEVELS, CurveFit, Forecast, Forecaster
from tunewise.lab.replay import TraceRun
from tunewise.lab.synthetic import synthetic
from tunewise.schedulers import RoundRobin
from tunewise.tuning.state import Cost, Snapshot

FAST = {"fit": CurveFit(n_walkers=8, n_steps=40, burn_in=20), "samples": 64}


@pytest.fixture(scope="module")
def trace():
    return synthetic(n_tasks=3, trials=96, seeds=1, seed=2)


def replay(trace, goal: float | None):
    rules = [] if goal is None else [stoppers.create("give-up", latency=goal, probability=0.9)]
    run = TraceRun(trace, RoundRobin(), seed_index=0, decision_cost=0.0, budget=Budget(time_budget=100.0),
                   forecaster=Forecaster(seed=0, **FAST), stoppers=rules)
    while run.step():
        pass
    return run.result()


def test_a_goal_out_of_reach_stops_the_run_with_the_forecast(trace):
    unreachable = 0.5 * trace.best_reachable(0)  # not even every task at its best recorded trial gets there
    result = replay(trace, unreachable)
    assert result.stopped_by.startswith(f"giving up on latency goal {unreachable * 1e3:.4g} ms: missed within "
                                        "the budget with probability")
    assert "ms at budget end (80 %: " in result.stopped_by
    assert result.history[-1][0] < replay(trace, None).history[-1][0]


def test_a_goal_the_run_reaches_does_not_stop_it(trace):
    plain = replay(trace, None)
    goal = 1.1 * plain.history[-1][1]
    assert plain.history[0][1] > goal  # the goal takes tuning to reach
    result = replay(trace, goal)
    assert result.stopped_by is None and result.history == plain.history and result.history[-1][1] <= goal


def test_an_uncalibrated_forecast_never_gives_up():
    early = Forecast(1, 10.0, (10.0, 100.0), (11e-3, 9e-3), (11e-3, 10e-3), (11e-3, 11e-3),
                     tuple(8.5e-3 + 3e-3 * q for q in END_LEVELS))
    rule = stoppers.create("give-up", latency=1e-3, probability=0.5)
    assert rule.check(Snapshot((), forecast=early), Cost()) is None  # 10 % of the budget: not shown, not acted on
    assert rule.check(Snapshot(()), Cost()) is None


@pytest.mark.parametrize("kwargs,expected", [
    ({"latency": 1e-3, "probability": 1.5}, r"probability must be a number in \(0, 1\], got 1.5"),
    ({"latency": 1e-3, "probability": 0}, r"probability must be a number in \(0, 1\], got 0"),
    ({"latency": -1.0, "probability": 0.9}, "latency must be a positive number"),
])
def test_bad_arguments_are_refused(kwargs, expected):
    with pytest.raises(InputError, match=expected):
        stoppers.create("give-up", **kwargs)
