"""Whole-model checks while tuning: when they are due, and a real run that stops at its goal on one."""

import math

import pytest

from tunewise.tuning.model_checks import EPOCH, SLOW_STRETCH, Checked, ModelCheck, reading
from tunewise.tuning.state import Snapshot, TaskView


def at(elapsed: float, estimate: float) -> Snapshot:
    return Snapshot((TaskView(0, "conv", 1, 1e9, 1.0, best_history=(estimate,)),), elapsed=elapsed)


def test_a_check_is_due_every_interval_and_sooner_once_the_estimate_reaches_the_goal():
    check = ModelCheck(100.0, goal=0.010)
    assert not check.due(at(99.0, 0.020)) and check.due(at(100.0, 0.020))
    assert not check.due(at(24.0, 0.009)) and check.due(at(25.0, 0.009))  # a quarter of the interval, at the goal
    check.checked(130.0, 12.0)
    assert not check.due(at(229.0, 0.020)) and check.due(at(230.0, 0.020))
    assert not check.due(at(230.0, 0.020), seconds_left=11.0)  # the last check took 12 s: no time for one
    assert not ModelCheck(100.0).due(at(50.0, 1e-9))  # without a goal, only the interval counts
    with pytest.raises(ValueError, match="positive number of seconds"):
        ModelCheck(0.0)


def test_a_last_check_is_due_as_a_time_limit_draws_near():
    check = ModelCheck(360.0)  # before any check, one is taken to cost 36 s
    assert not check.due(at(200.0, 0.020), seconds_left=73.0)  # over twice a check's time left
    assert check.due(at(200.0, 0.020), seconds_left=71.0)  # the last check the limit leaves room for
    assert not check.due(at(200.0, 0.020), seconds_left=35.0)  # no room for one
    assert not check.due(at(179.0, 0.020), seconds_left=50.0)  # too little tuned yet: under five checks' time
    check.checked(200.0, 10.0)
    assert not check.due(at(220.0, 0.020), seconds_left=15.0)  # tuned 20 s since the last check, which took 10
    assert check.due(at(250.0, 0.020), seconds_left=15.0)


def test_the_fastest_check_is_offered_only_when_the_run_went_on_after_it():
    check = ModelCheck(100.0)
    assert check.fastest_before(8) is None
    check.fastest = Checked(1e-3, compiled=None, max_error=0.0, trials=4)
    assert check.fastest_before(8) is check.fastest and check.fastest_before(4) is None


def test_the_last_check_is_the_final_model_only_when_no_trial_followed_it():
    check = ModelCheck(60.0)
    assert check.holding(8) is None
    check.latest = Checked(1e-3, compiled=None, max_error=0.0, trials=4)
    assert check.holding(4) is check.latest and check.holding(8) is None


def test_by_epoch_a_check_is_due_after_one_slot_per_live_task():
    def slot(number, live):
        return Snapshot(tuple(TaskView(i, f"t{i}", 1, 1e9, 1.0, finished=i >= live) for i in range(4)), slot=number)

    check = ModelCheck(EPOCH)
    assert [check.due(slot(n, 3)) for n in range(1, 8)] == [False, False, False, True, False, False, True]
    # the epoch that began at slot 7 had 3 live tasks: it ends at 10; the next ones, of 1 live task, last 1 slot
    assert [check.due(slot(n, 1)) for n in range(8, 12)] == [False, False, True, True]


@pytest.mark.timing
@pytest.mark.tvm
def test_a_run_with_a_goal_stops_on_the_measured_latency_and_stores_it(tiny_mlp, measurer):
    from tunewise import energy, schedulers, stoppers, stores
    from tunewise.tuning import session

    store = stores.create("sqlite://")
    run_id = store.create_run(tiny_mlp.name, str(tiny_mlp.target), "round-robin", {})
    goal = 10.0  # seconds: any compiled tiny-mlp reaches it, so the first check ends the run
    rule = stoppers.create("goal", latency=goal, measured_only=True)
    run = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(max_trials=40), measurer, store,
                          run_id, session.SessionParts(trials_per_slot=4, stoppers=[rule],
                                                       meter=energy.create("estimate"),
                                                       checker=ModelCheck(1e-3, goal=goal)))
    final = run.run()
    (point,) = store.get_model_latencies(run_id)
    assert 0 < point.latency < 1e-3 and point.message == "" and point.seconds > 0 and point.joules > 0
    assert 0 < run.checker.build_seconds < point.seconds  # what compiling took, for the time after tuning
    assert final.trials == 4 and point.trials == 4  # checked after the first slot, which reached the goal
    assert run.checker.holding(final.trials).latency == point.latency  # the final model, compiled already
    assert run.ledger.stopped_by.startswith("latency goal 1e+04 ms reached: measured model latency")
    assert final.measured == ((point.elapsed, point.latency),)
    joules = [c.joules for c in store.get_checkpoints(run_id)]
    assert len(joules) == 1 and joules[0] > 0 and run.joules() >= joules[0] + point.joules
    (phases,) = [c.phase_joules for c in store.get_checkpoints(run_id)]
    assert all(j >= 0 for j in phases) and phases[1] > 0 and sum(phases) <= joules[0]  # building costs energy
    # resumed with a larger budget: the measured point is told again, and the goal still holds
    again = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(max_trials=80), measurer,
                            store, run_id, session.SessionParts(trials_per_slot=4, stoppers=[
                                stoppers.create("goal", latency=goal, measured_only=True)]))
    assert again.snapshot().measured == final.measured and again.run().trials == 4
    assert math.isclose(again.snapshot().measured[0][1], point.latency)


def test_a_check_reads_its_own_time_unless_it_was_timed_in_a_slow_stretch():
    assert reading(12e-3) == 12e-3  # the first check: nothing to compare with
    # the previous check read 20 ms; this model took 0.6x its time in the same rounds: 12 ms at that speed
    assert reading(12.5e-3, 20e-3, 0.6) == 12.5e-3  # timed as fast: its own time, not the lesser
    assert reading(11e-3, 20e-3, 0.6) == 11e-3  # faster than the previous check's speed: its own time
    assert reading(12e-3 * SLOW_STRETCH * 1.01, 20e-3, 0.6) == pytest.approx(12e-3)  # a slow stretch: scaled
    assert reading(12e-3 * SLOW_STRETCH * 0.99, 20e-3, 0.6) == pytest.approx(12e-3 * SLOW_STRETCH * 0.99)


@pytest.mark.tvm
def test_a_check_times_the_previous_checks_model_beside_its_own(tiny_mlp):
    from tvm.s_tir.meta_schedule.database import MemoryDatabase

    check = ModelCheck(60.0)
    first_latency, _ = check.measure(tiny_mlp, MemoryDatabase(), trials=0)
    first = check.latest
    assert first.timed == first.latency == first_latency and first.to_previous is None  # nothing to compare with
    latency, message = check.measure(tiny_mlp, MemoryDatabase(), trials=4)
    second = check.latest
    assert message == "" and 0.5 < second.to_previous < 2  # the same records: the same model, timed in turn
    assert latency == second.latency == reading(second.timed, first.latency, second.to_previous)
    assert check.fastest.latency == min(first.latency, second.latency)
