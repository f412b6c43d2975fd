"""DynaTune schedulers on synthetic snapshots: untried tasks, beliefs, rewards, and the three choice rules."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from tunewise import schedulers
from tunewise.errors import InputError
from tunewise.schedulers import DynaTune, DynaTuneEpsilonGreedy, DynaTuneSoftmax
from tunewise.schedulers import _dynatune as dynatune_module
from tunewise.tuning.state import Snapshot, TaskView

FAST = {"n_walkers": 16, "n_steps": 120, "burn_in": 60, "thin": 1}
FLOPS = 1e8  # 1e8 FLOPs at 10 GFLOPS is 10 ms


def task(k: int, gflops, weight: int = 1, finished: bool = False) -> TaskView:
    """A task whose best throughput after each of its slots (16 trials each) is ``gflops``."""
    best = tuple(FLOPS / (g * 1e9) if g > 0 else math.inf for g in gflops)
    trials = tuple(16 * (i + 1) for i in range(len(gflops)))
    return TaskView(k, f"t{k}", weight, FLOPS, 0.02, best, trials, 16 * len(gflops), finished=finished)


CLIMBING = [10.0, 11.5, 13.0, 14.4, 15.7, 17.0, 18.2, 19.3]  # still rising by ~1.2 GFLOPS a slot
FLAT = [10.0, 16.0, 18.5, 19.1, 19.3, 19.3, 19.3, 19.3]  # saturated at the same level


def snapshot(*tasks: TaskView) -> Snapshot:
    return Snapshot(tuple(tasks), slot=sum(t.slots for t in tasks), trials_per_slot=16)


def test_untried_tasks_go_heaviest_first():
    untried = [TaskView(k, f"t{k}", w, FLOPS, latency) for k, (w, latency) in enumerate(
        [(1, 1e-5), (4, 2e-3), (1, 5e-3), (8, 1e-6)])]
    scheduler = DynaTune(seed=0, **FAST)
    prior = scheduler.prior_reduction(snapshot(*untried))
    assert prior == pytest.approx({0: 1e-5 / 13.018e-3, 1: 8e-3 / 13.018e-3, 2: 5e-3 / 13.018e-3,
                                   3: 8e-6 / 13.018e-3})
    assert scheduler.next(snapshot(*untried)) == 1  # weight x untuned latency, not declaration order


def test_the_prior_scales_with_what_tuned_tasks_shed():
    # task 0 went from 20 ms to 10 ms (half shed), task 1 to 5 ms (three quarters): the median sheds 62.5 %
    tuned = [task(0, [10.0]), task(1, [20.0])]
    fresh = TaskView(2, "t2", 2, FLOPS, 0.02)
    prior = DynaTune(seed=0, **FAST).prior_reduction(snapshot(*tuned, fresh))
    assert prior == {2: pytest.approx(2 * 0.02 * 0.625 / (0.01 + 0.005 + 0.04))}


@pytest.mark.parametrize("cls", [DynaTune, DynaTuneEpsilonGreedy, DynaTuneSoftmax])
def test_every_task_is_tried_once_before_any_gets_a_second_slot(cls):
    # the tried task holds 99.6 % of the model and still climbs; the untried ones hold 0.04 % and 0.4 % of
    # it: UCB1 plays every arm once first, here in the order of the prior, whatever the rewards say
    heavy = task(0, CLIMBING, weight=50)
    tiny = TaskView(1, "t1", 1, FLOPS, 1e-4)
    small = TaskView(2, "t2", 1, FLOPS, 1e-3)
    scheduler = cls(seed=0, **FAST)
    assert scheduler.next(snapshot(heavy, tiny, small)) == 2
    assert scheduler.next(snapshot(heavy, tiny, task(2, [20.0]))) == 1
    # once all are tried the beliefs decide: the climbing heavy task, not the flat light ones
    flat = [task(k, FLAT) for k in (1, 2)]
    picks = [scheduler.next(snapshot(heavy, *flat)) for _ in range(10)]
    assert picks.count(0) >= 9


def test_a_task_that_only_failed_has_no_reward_and_is_not_hogging():
    failing = task(1, [0.0, 0.0])  # two slots, nothing valid yet: the paper's warm-up would insist on it
    scheduler = DynaTune(c=0.0, seed=0, **FAST)
    assert scheduler.prior_reduction(snapshot(task(0, CLIMBING), failing)) == {}
    assert scheduler.next(snapshot(task(0, CLIMBING), failing)) == 0


def test_the_exploration_bonus_is_scaled_by_what_the_task_holds():
    # a flat light task with far fewer slots than a climbing heavy one: the rewards alone (c = 0) pick the
    # heavy task whatever its weight; a large c picks the light task only when the heavy one holds no more of
    # the model than it does (weight 1). At a tenth of the model, the light task's bonus is a tenth too,
    # where UCB1's unscaled bonus would hand it the slot.
    heavy = task(0, CLIMBING + [20.3, 21.2, 22.0, 22.7, 23.3, 23.8, 24.2, 24.5] * 3, weight=10)
    light = task(1, FLAT[:6])
    for weight, with_bonus in ((10, 0), (1, 1)):
        snap = snapshot(dataclasses.replace(heavy, weight=weight), light)
        assert DynaTune(c=0.0, seed=0, **FAST).next(snap) == 0
        assert DynaTune(c=50.0, seed=0, **FAST).next(snap) == with_bonus


@pytest.mark.parametrize("cls", [DynaTune, DynaTuneEpsilonGreedy, DynaTuneSoftmax])
def test_prefers_the_task_whose_curve_still_climbs(cls):
    kwargs = {"epsilon": 0.0} if cls is DynaTuneEpsilonGreedy else {}
    kwargs = {"temperature": 0.05} if cls is DynaTuneSoftmax else kwargs
    snap = snapshot(task(0, FLAT), task(1, CLIMBING))
    # each seed is a fresh pair of fits; a scheduler's repeated calls on one snapshot reuse its cached beliefs
    for seed in range(5):
        scheduler = cls(seed=seed, **FAST, **kwargs)
        reduction = scheduler.expected_reduction(snap)
        assert reduction[1] > reduction[0]
        if cls is DynaTuneSoftmax:  # the one rule that draws: at this temperature, task 0 below 1 % a draw
            assert np.mean([scheduler.next(snap) for _ in range(200)]) >= 0.97
        else:
            assert scheduler.next(snap) == 1
    ratio = [cls(seed=seed, **FAST).expected_reduction(snap) for seed in range(5)]
    assert np.median([r[1] / r[0] for r in ratio]) > 3


def test_weight_scales_the_reward():
    snap = snapshot(task(0, CLIMBING), task(1, CLIMBING, weight=3))
    reduction = DynaTune(seed=0, **FAST).expected_reduction(snap)
    # Each task's fit has its own seed: with short chains the beliefs differ by Monte Carlo noise.
    assert reduction[1] == pytest.approx(3 * reduction[0], rel=0.3)
    assert DynaTune(seed=0, **FAST).next(snap) == 1


def test_rewards_are_fractions_of_the_model_latency():
    snap = snapshot(task(0, FLAT), task(1, CLIMBING), task(2, [0.0]), task(3, CLIMBING, finished=True))
    reduction = DynaTune(seed=0, **FAST).expected_reduction(snap)
    assert set(reduction) == {0, 1}  # only live tasks with a valid result have a belief
    assert all(0.0 <= r <= 1.0 for r in reduction.values())


def test_ucb_bonus_favours_the_less_tried_task():
    # task 0 still climbs after 32 slots, task 1 is flat after 6: its reward is the smaller, so without the
    # bonus (c = 0) task 0 gets the slot; with a large c the bonus of the less tried task decides.
    many = task(0, CLIMBING + [20.3, 21.2, 22.0, 22.7, 23.3, 23.8, 24.2, 24.5] * 3)
    few = task(1, FLAT[:6])
    snap = snapshot(many, few)
    reduction = DynaTune(seed=0, **FAST).expected_reduction(snap)
    assert reduction[0] > reduction[1]
    assert DynaTune(c=0.0, seed=0, **FAST).next(snap) == 0
    assert DynaTune(c=50.0, seed=0, **FAST).next(snap) == 1


def test_beliefs_are_cached_until_the_task_moves_on(monkeypatch):
    fits = []
    fit = dynatune_module.CurveModel.fit

    def counting_fit(self, x, y, **kwargs):
        fits.append(len(x))
        return fit(self, x, y, **kwargs)

    monkeypatch.setattr(dynatune_module.CurveModel, "fit", counting_fit)
    scheduler = DynaTune(seed=0, **FAST)
    snap = snapshot(task(0, FLAT), task(1, CLIMBING[:-1]))
    scheduler.next(snap)
    scheduler.next(snap)
    assert fits == [8, 7]
    scheduler.next(snapshot(task(0, FLAT), task(1, CLIMBING)))
    assert fits == [8, 7, 8]


def test_beliefs_do_not_depend_on_the_order_they_were_computed_in():
    first = snapshot(task(0, FLAT), task(1, CLIMBING))
    a = DynaTune(seed=3, **FAST).expected_reduction(first)
    other = DynaTune(seed=3, **FAST)
    other.expected_reduction(snapshot(task(1, CLIMBING)))
    assert other.expected_reduction(first) == a


def test_peak_is_fixed_or_a_power_of_two_above_twice_the_best():
    snap = snapshot(task(0, FLAT), task(1, CLIMBING))  # best 19.3 GFLOPS
    assert DynaTune(**FAST).peak(snap) == 64.0
    assert DynaTune(peak_gflops=9700.0, **FAST).peak(snap) == 9700.0


def test_epsilon_greedy_explores_at_its_rate():
    snap = snapshot(task(0, FLAT), task(1, CLIMBING), task(2, FLAT))
    scheduler = DynaTuneEpsilonGreedy(epsilon=0.3, seed=1, **FAST)
    picks = np.array([scheduler.next(snap) for _ in range(3000)])
    # Greedy picks 1; exploration spreads 0.3 evenly: expect 0.1 each for tasks 0 and 2 (std ~0.0055).
    assert np.mean(picks == 0) == pytest.approx(0.1, abs=0.025)
    assert np.mean(picks == 2) == pytest.approx(0.1, abs=0.025)


def test_softmax_follows_the_rewards():
    snap = snapshot(task(0, FLAT), task(1, CLIMBING), task(2, CLIMBING, weight=3))
    reward = np.array(list(DynaTuneSoftmax(seed=0, **FAST).expected_reduction(snap).values()))
    assert reward[0] < reward[1] < reward[2]
    hot = DynaTuneSoftmax(temperature=100.0, seed=0, **FAST)
    share = np.bincount([hot.next(snap) for _ in range(3000)], minlength=3) / 3000
    np.testing.assert_allclose(share, 1 / 3, atol=0.04)  # a hot softmax is nearly uniform
    cold = DynaTuneSoftmax(temperature=0.01, seed=0, **FAST)
    assert [cold.next(snap) for _ in range(200)] == [2] * 200  # a cold one always takes the best
    warm = DynaTuneSoftmax(temperature=0.5, seed=0, **FAST)
    share = np.bincount([warm.next(snap) for _ in range(3000)], minlength=3) / 3000
    assert share[0] < share[1] < share[2]  # in between, the order of the rewards
    # and the documented law: proportional to exp(reward / (temperature * max reward)); std of a share < 0.009
    law = np.exp(reward / (0.5 * reward.max()))
    np.testing.assert_allclose(share, law / law.sum(), atol=0.03)


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("dynatune", {"c": -1.0}),
        ("dynatune", {"peak_gflops": 0.0}),
        ("dynatune", {"family": "cubic"}),
        ("dynatune", {"n_walkers": 4}),
        ("dynatune-egreedy", {"epsilon": 1.5}),
        ("dynatune-softmax", {"temperature": 0.0}),
        ("dynatune-softmax", {"epsilon": 0.1}),
    ],
)
def test_create_rejects_bad_arguments(name, kwargs):
    with pytest.raises(InputError, match=f"scheduler '{name}'.*{next(iter(kwargs))}"):
        schedulers.create(name, **kwargs)


def test_create_lists_the_shared_arguments():
    with pytest.raises(InputError, match="c, family, peak_gflops, n_walkers"):
        schedulers.create("dynatune", C=2)
