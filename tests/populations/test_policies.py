"""Population policies: the payoff rate, Trimmer's suspension and resumption, fair shares, the contract."""

from __future__ import annotations

import math
import re

import pytest

from tunewise import populations
from tunewise.errors import InputError
from tunewise.populations import FairShare, ModelView, PopulationPolicy, Suspension


def model(name, *points, finished=False, suspended=False):
    return ModelView(name, tuple(points), finished, suspended)


def test_the_rate_is_the_relative_gain_of_the_last_round_per_unit_of_cost():
    assert model("new").rate == math.inf
    assert model("one", (0.0, 2.0)).rate == math.inf
    assert model("m", (0.0, 2.0), (60.0, 1.0), (90.0, 0.9)).rate == pytest.approx(0.1 / 30.0)
    assert model("flat", (0.0, 2.0), (60.0, 2.0)).rate == 0.0
    assert model("m", (0.0, 2.0), (60.0, 1.0)).cost == 60.0


def test_suspension_runs_the_models_that_pay_off_most_and_suspends_the_rest():
    fleet = [model("slow", (0, 1.0), (60, 0.99)), model("fast", (0, 1.0), (60, 0.5)),
             model("mid", (0, 1.0), (60, 0.8)), model("done", (0, 1.0), (60, 0.1), finished=True)]
    plan = Suspension().plan(fleet, capacity=2)
    assert plan.run == (1, 2) and plan.suspend == (0,) and plan.resume == ()
    assert Suspension().plan(fleet, capacity=8).run == (1, 2, 0)  # room for all: nobody waits


def test_a_suspended_model_comes_back_once_the_running_one_stalls_below_it():
    policy = Suspension()
    a = [(0, 1.0), (60, 0.5)]  # halves its latency in its first round
    b = [(0, 1.0), (60, 0.7)]
    assert policy.plan([model("a", *a), model("b", *b)], 1).run == (0,)
    a.append((120, 0.45))  # a's second round gains 10 %: less than b's 30 %
    plan = policy.plan([model("a", *a), model("b", *b, suspended=True)], 1)
    assert plan.run == (1,) and plan.resume == (1,) and plan.suspend == (0,)


def test_a_model_that_has_not_tuned_goes_first_and_a_finished_one_frees_its_place():
    fleet = [model("tuned", (0, 1.0), (60, 0.2)), model("new", (0, 1.0))]
    assert Suspension().plan(fleet, 1).run == (1,)
    fleet = [model("tuned", (0, 1.0), (60, 0.9)), model("better", (0, 1.0), (60, 0.2), finished=True)]
    assert Suspension().plan(fleet, 1).run == (0,)


def test_fair_shares_go_to_the_models_that_have_cost_least():
    fleet = [model("a", (0, 1.0), (120, 0.5)), model("b", (0, 1.0), (60, 0.99)), model("c", (0, 1.0), (60, 0.98))]
    assert FairShare().plan(fleet, 2).run == (1, 2)
    assert FairShare().plan(fleet, 2).suspend == (0,)


class Greedy(PopulationPolicy):
    def __init__(self, *, picks):
        self.picks = picks

    def select(self, models, capacity):
        return self.picks


@pytest.mark.parametrize("picks", [(0, 0), (0, 1, 2), (2,), ()])
def test_plan_refuses_a_choice_that_breaks_the_contract(picks):
    fleet = [model("a", (0, 1.0)), model("b", (0, 1.0)), model("c", (0, 1.0), finished=True)]
    refused = f"Greedy(picks={picks!r}) chose {picks} from 2 unfinished models at capacity 2"
    with pytest.raises(RuntimeError, match=re.escape(refused)):
        Greedy(picks=picks).plan(fleet, capacity=2)
    assert Greedy(picks=()).plan([fleet[2]], capacity=1).run == ()  # all finished: nothing to run


def test_create_builds_policies_by_name_and_rejects_bad_input_in_one_line():
    assert isinstance(populations.create("suspension"), Suspension)
    assert populations.names() == ["fair", "suspension"]
    for bad, kwargs, message in (
            ("pbt", {}, "unknown population policy 'pbt'; valid names: fair, suspension"),
            ("fair", {"quantile": 0.5}, "population policy 'fair' got unknown arguments ['quantile']")):
        with pytest.raises(InputError, match=re.escape(message)) as err:
            populations.create(bad, **kwargs)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="capacity must be at least 1, got 0"):
        Suspension().plan([], capacity=0)
