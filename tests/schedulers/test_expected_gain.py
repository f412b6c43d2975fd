"""The expected-gain scheduler: each live task's expected model-latency gain per second of its next slot."""

from __future__ import annotations

import math

import pytest

from tunewise import schedulers
from tunewise.lab.replay import replay
from tunewise.schedulers import ExpectedGain
from tunewise.tuning.state import Snapshot, TaskView


def tuned(k: int, best: float, trials: int = 16, weight: int = 1, flops: float = 1e9, default: float = 1e-2,
          slots: tuple[int, ...] = ()) -> TaskView:
    """Task ``k`` after ``trials // 16`` slots, its best ``best`` seconds since the first; its slots numbered
    ``slots`` in the run (none given: the snapshot has no durations for it)."""
    n = trials // 16
    return TaskView(k, f"t{k}", weight, flops, default, (best,) * n, tuple(16 * (i + 1) for i in range(n)), trials,
                    slot_numbers=slots)


def test_a_tried_tasks_slot_is_expected_to_follow_one_power_law():
    task = tuned(0, 2e-3, trials=32, weight=3)
    gain = ExpectedGain(exponent=0.2).expected_gain(Snapshot((task,)), task)
    assert gain == pytest.approx(3 * 2e-3 * (1 - (32 / 48) ** 0.2))
    # the slot is cut by a per-task budget: 8 trials left
    assert ExpectedGain(exponent=0.2).expected_gain(Snapshot((task,), per_task_trials=40), task) == pytest.approx(
        3 * 2e-3 * (1 - (32 / 40) ** 0.2))


def test_an_untried_task_is_expected_to_reach_the_throughput_of_the_tried_ones():
    conv = tuned(0, 1e-3, flops=1e9)  # 1 TFLOPS
    big = TaskView(1, "big", 2, 4e9, 1e-2)  # 4 ms once tuned: 2 x (10 - 4) ms to gain
    reshape = TaskView(2, "reshape", 4, 0.0, 1e-5)  # no FLOPs: a quarter of 4 x 10 us while none was tried
    snap = Snapshot((conv, big, reshape))
    scheduler = ExpectedGain(reference_quantile=0.5)
    assert scheduler.expected_gain(snap, big) == pytest.approx(2 * (1e-2 - 4e-3))
    assert scheduler.expected_gain(snap, reshape) == pytest.approx(4 * 1e-5 * 0.25)
    assert scheduler.next(snap) == 1
    # the big task tuned, the layout operator still waits: the convolution's next slot is worth more
    snap = Snapshot((conv, tuned(1, 4e-3, weight=2, flops=4e9), reshape))
    assert scheduler.next(snap) == 1
    assert scheduler.expected_gain(snap, reshape) < scheduler.expected_gain(snap, snap.tasks[0])


def test_a_tried_layout_operator_sets_what_the_others_are_expected_to_shed():
    shed = tuned(0, 6e-6, flops=0.0, default=1e-5)  # shed 40 % of its untuned latency
    other = TaskView(1, "reshape", 1, 0.0, 2e-5)
    assert ExpectedGain().expected_gain(Snapshot((shed, other)), other) == pytest.approx(0.4 * 2e-5)


def test_a_failed_untuned_schedule_goes_first_and_scores_nothing_once_tried_without_a_valid_result():
    failed = TaskView(1, "failed", 1, 1e6, math.inf)
    snap = Snapshot((tuned(0, 1e-3), failed))
    assert ExpectedGain().next(snap) == 1
    tried = TaskView(1, "failed", 1, 1e6, math.inf, (math.inf,), (16,), 16, failures=16)
    assert ExpectedGain().expected_gain(Snapshot((tuned(0, 1e-3), tried)), tried) == 0.0


def test_the_first_slot_goes_to_the_heaviest_task_untuned():
    tasks = tuple(TaskView(k, f"t{k}", w, 1e6, latency) for k, (w, latency) in enumerate([(1, 1e-3), (2, 3e-3),
                                                                                           (8, 1e-3)]))
    assert ExpectedGain().next(Snapshot(tasks)) == 2


def test_the_gain_is_per_second_of_the_tasks_slots():
    # a's slot took 10 s, b's 30 s: both second slots are expected to take the 20 s mean of first slots,
    # scaled by each task's own pace against it (shrunk to 1 by 2 pseudo-slots): 20 x 2.5/3, 20 x 3.5/3
    a = tuned(0, 1e-3, slots=(0,))
    b = tuned(1, 1.2e-3, slots=(1,))
    timed = Snapshot((a, b), history=((0.0, 1.0), (10.0, 1.0), (40.0, 1.0)))
    scheduler = ExpectedGain()
    assert scheduler.slot_seconds(timed) == pytest.approx({0: 20 * 2.5 / 3, 1: 20 * 3.5 / 3})
    assert scheduler.next(timed) == 0
    assert scheduler.next(Snapshot((a, b))) == 1  # no durations: b's larger gain wins


def test_a_slot_is_expected_to_cost_what_the_runs_slots_at_its_position_cost():
    # a's first slot took 30 s and its second 5 s; b's first 30 s: b's second is expected to take 5 s
    a = tuned(0, 1e-3, trials=32, slots=(0, 2))
    b = tuned(1, 1e-3, slots=(1,))
    snap = Snapshot((a, b), history=((0.0, 1.0), (30.0, 1.0), (60.0, 1.0), (65.0, 1.0)))
    assert snap.slot_seconds() == ((30.0, 5.0), (30.0,))
    assert ExpectedGain(cost_prior_slots=0.0).slot_seconds(snap)[1] == pytest.approx(5.0)
    # past the longest task's slots: the mean of all of them
    assert ExpectedGain(cost_prior_slots=0.0).slot_seconds(snap)[0] == pytest.approx(65.0 / 3)


def test_it_skips_the_tasks_a_warm_up_pass_would_waste_slots_on(trace_with_layout_tasks):
    # expected-gain reaches 5 % of the best reachable latency without trying most of the layout operators,
    # gradient tries them all first
    trace = trace_with_layout_tasks
    best = trace.best_reachable(0)
    runs = {name: replay(trace, schedulers.create_seeded(name, 0), seed_index=0, decision_cost=0.0)
            for name in ("gradient", "expected-gain")}
    tried = {name: {k for k in run.picks if k >= 4} for name, run in runs.items()}
    assert tried["gradient"] == set(range(4, 10))
    reached = next(i for i, (_, latency) in enumerate(runs["expected-gain"].history) if latency <= 1.05 * best)
    assert len({k for k in runs["expected-gain"].picks[:reached] if k >= 4}) <= 2


@pytest.mark.parametrize("kwargs, message", [({"exponent": 0}, "exponent"), ({"reference_quantile": 2}, "quantile"),
                                             ({"layout_shed": -1}, "layout_shed"),
                                             ({"cost_prior_slots": -1}, "cost_prior_slots")])
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ExpectedGain(**kwargs)
