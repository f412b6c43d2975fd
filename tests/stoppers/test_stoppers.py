"""Stop rules: each one on ledgers driven by hand, every scheduler through the replay, and create()."""

from __future__ import annotations

import math

import pytest

from tunewise import schedulers, stoppers
from tunewise.errors import InputError
from tunewise.lab.replay import TraceTask, replay
from tunewise.lab.synthetic import synthetic
from tunewise.schedulers import RoundRobin
from tunewise.stoppers import CostBudget, DiminishingReturns, LatencyGoal
from tunewise.tuning.ledger import Budget, Ledger
from tunewise.tuning.state import Cost, Snapshot

# the model estimate starts at 2 * 4 ms + 1 ms = 9 ms
TASKS = (TraceTask("heavy", 2, 1e9, 4e-3), TraceTask("light", 1, 1e6, 1e-3))


class Counting(RoundRobin):
    """Round-robin that counts how often it was asked."""

    def __init__(self):
        self.asked = 0

    def next(self, snapshot):
        self.asked += 1
        return super().next(snapshot)


def book(rules, *, tasks=TASKS, clock=None, joules=None, trials_per_slot=2):
    now = clock or [0.0]
    return Ledger(tasks, Counting(), Budget(max_trials=1000), trials_per_slot=trials_per_slot,
                  clock=lambda: now[0], stoppers=rules, joules=joules)


def run_slot(ledger, best, *, clock=None, seconds=0.0):
    """Ask for a slot and tell it ``best`` for each trial; advance ``clock`` by ``seconds``."""
    slot = ledger.ask()
    assert slot is not None, ledger.stopped_by
    if clock is not None:
        clock[0] += seconds
    ledger.tell(slot, [best] * slot.n)
    return slot


# ---- latency goal ----------------------------------------------------------------------------------------


def test_the_goal_ends_the_run_once_the_estimate_reaches_it_before_the_scheduler_is_asked():
    ledger = book([LatencyGoal(latency=6e-3)])
    run_slot(ledger, 3e-3)  # heavy: 2 * 3 + 1 = 7 ms
    run_slot(ledger, 1e-3)  # light: unchanged, 7 ms
    run_slot(ledger, 2e-3)  # heavy: 2 * 2 + 1 = 5 ms <= 6 ms
    asked = ledger.scheduler.asked
    assert ledger.ask() is None and ledger.scheduler.asked == asked
    assert ledger.stopped_by == "latency goal 6 ms reached: estimated model latency 5 ms"


def test_a_measured_model_latency_wins_over_the_estimate():
    ledger = book([LatencyGoal(latency=6e-3)])
    run_slot(ledger, 2e-3)  # estimate 5 ms
    ledger.tell_model_latency(7e-3)  # the real model is slower than the estimate says
    run_slot(ledger, 1e-3)
    assert ledger.snapshot().measured == ((0.0, 7e-3),)
    ledger.tell_model_latency(5.5e-3)
    assert ledger.ask() is None and "measured model latency 5.5 ms" in ledger.stopped_by


def test_a_goal_on_measured_latencies_only_ignores_the_estimate():
    ledger = book([LatencyGoal(latency=6e-3, measured_only=True)])
    run_slot(ledger, 1e-3)  # estimate 3 ms
    run_slot(ledger, 1e-3)
    ledger.tell_model_latency(5e-3)
    assert ledger.ask() is None and ledger.stopped_by.endswith("measured model latency 5 ms")


# ---- cost budgets ------------------------------------------------------------------------------------


def test_budgets_end_the_run_at_the_first_slot_boundary_past_them():
    clock = [0.0]
    ledger = book([CostBudget(seconds=25.0)], clock=clock)
    for _ in range(3):
        run_slot(ledger, 3e-3, clock=clock, seconds=10.0)
    assert ledger.ask() is None and ledger.stopped_by == "time budget 25 s spent: 30 s"
    ledger = book([CostBudget(trials=5)], trials_per_slot=2)
    for _ in range(3):
        run_slot(ledger, 3e-3)
    assert ledger.ask() is None and ledger.stopped_by == "trial budget 5 spent: 6 trials"


def test_an_energy_budget_reads_the_drivers_joules_and_needs_them():
    joules = [0.0]
    ledger = book([CostBudget(joules=100.0)], joules=lambda: joules[0])
    run_slot(ledger, 3e-3)
    joules[0] = 99.0
    run_slot(ledger, 3e-3)
    assert ledger.cost() == Cost(0.0, 4, 99.0)
    joules[0] = 100.0
    assert ledger.ask() is None and ledger.stopped_by == "energy budget 100 J spent: 100 J"
    with pytest.raises(InputError, match="not metered"):
        book([CostBudget(joules=100.0)]).ask()


def test_a_replay_charges_energy_at_the_given_power_on_its_simulated_clock():
    trace = synthetic(n_tasks=3, trials=64, seeds=1, seed=0)
    run = replay(trace, RoundRobin(), seed_index=0, decision_cost=0.0, stoppers=[CostBudget(joules=2000.0)],
                 watts=50.0)  # 40 simulated seconds
    assert run.stopped_by.startswith("energy budget 2000 J spent")
    assert run.history[-2][0] < 40.0 <= run.history[-1][0] == run.final.elapsed
    with pytest.raises(InputError, match="not metered"):
        replay(trace, RoundRobin(), seed_index=0, stoppers=[CostBudget(joules=2000.0)])


# ---- diminishing returns (Trimmer, equations 2 and 3) -------------------------------------------------------


def one_task_run(rule, bests, seconds=10.0):
    """One task (default 10 ms), one slot an epoch: slot ``i`` takes ``seconds`` and reaches ``bests[i]``.
    Returns the reason the run ended (``None`` if it goes on) and the slots it ran."""
    clock = [0.0]
    ledger = book([rule], tasks=(TraceTask("t", 1, 1e9, 10e-3),), clock=clock)
    told = 0
    for best in [*bests, None]:
        slot = ledger.ask()
        if slot is None or best is None:
            break
        clock[0] += seconds
        ledger.tell(slot, [best] * slot.n)
        told += 1
    return ledger.stopped_by, told


def test_diminishing_returns_stop_once_the_improvement_rate_falls_by_a_quarter():
    # 10 -> 6 ms in 10 s (-0.4 ms/s), then -> 4 ms (-0.2 ms/s): the rate changed by -50 %
    reason, slots = one_task_run(DiminishingReturns(), [6e-3, 4e-3, 3e-3])
    assert slots == 2
    assert reason == ("diminishing returns: the model-latency improvement per second changed by -50% from the "
                      "epoch before (phi -0.25)")
    # -0.4 then -0.35 ms/s (-12.5 %) goes on; then -0.15 ms/s (-57 %) stops
    assert one_task_run(DiminishingReturns(), [6e-3, 2.5e-3, 1e-3, 0.5e-3])[1] == 3
    # -0.4 then -0.25 ms/s is -37.5 %: past the paper's phi, within phi = -0.5
    assert one_task_run(DiminishingReturns(), [6e-3, 3.5e-3, 3e-3])[1] == 2
    assert one_task_run(DiminishingReturns(phi=-0.5), [6e-3, 3.5e-3]) == (None, 2)


def check(rule, points):
    """What ``rule`` says once it has seen the measured model latencies ``points`` ((cost, latency) pairs), one
    check per point."""
    verdicts = [rule.check(Snapshot((), measured=tuple((0.0, f) for _, f in points[:i + 1])), Cost(seconds=o))
                for i, (o, _) in enumerate(points)]
    assert all(v is None for v in verdicts[:-1])
    return verdicts[-1]


@pytest.mark.parametrize(("latencies", "stops"), [
    ((10, 9, 10), True),  # slower after an improvement
    ((10, 11, 8), False),  # omega_1 = -1: recovering faster than it worsened is no decline
    ((10, 11, 13), True),  # slower, and slower again at twice the pace
    ((10, 11, 11.5), False),  # slower, but at half the pace: the rate changed by +50 %
    ((10, 10, 10), True),  # no change in two epochs
    ((10, 10, 9), False),  # no change, then an improvement
    ((10, 8, 6.6), True),  # -0.2 then -0.14 ms/s: -30 %
    ((10, 8, 6.4), False),  # -0.2 then -0.16 ms/s: -20 %
])
def test_diminishing_returns_follow_equation_2_with_its_signs(latencies, stops):
    points = [(10.0 * i, f * 1e-3) for i, f in enumerate(latencies)]
    assert (check(DiminishingReturns(), points) is not None) is stops


def test_measured_latencies_replace_the_estimate_and_are_charged_at_the_cost_they_are_first_seen():
    clock = [0.0]
    rule = DiminishingReturns(per="trials")
    ledger = book([rule], clock=clock)
    run_slot(ledger, 3e-3)
    ledger.tell_model_latency(8e-3)
    run_slot(ledger, 1e-3)
    assert rule.points == [(2.0, 8e-3)]  # the estimate's first point (0 trials, 9 ms) is dropped
    ledger.tell_model_latency(7e-3)
    ledger.ask()
    assert rule.points == [(2.0, 8e-3), (4.0, 7e-3)]


def test_an_epoch_is_one_slot_per_live_task():
    clock = [0.0]
    rule = DiminishingReturns(phi=-10.0)
    ledger = book([rule], clock=clock)
    for best in (3e-3, 1e-3, 2e-3, 1e-3, 1e-3):
        run_slot(ledger, best, clock=clock, seconds=10.0)
    ledger.ask()
    # two live tasks: points at 0, 20 and 40 s (9 ms, then 2 * 3 + 1 = 7 ms, then 2 * 2 + 1 = 5 ms)
    assert [cost for cost, _ in rule.points] == [0.0, 20.0, 40.0]
    assert [latency for _, latency in rule.points] == pytest.approx([9e-3, 7e-3, 5e-3])
    ledger = book([DiminishingReturns(per="joules")])
    with pytest.raises(InputError, match="not metered"):
        ledger.ask()


# ---- every scheduler -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", schedulers.names())
def test_every_scheduler_stops_at_the_first_slot_boundary_a_rule_says(name):
    trace = synthetic(n_tasks=3, trials=48, seeds=1, seed=1)
    extra = {"n_walkers": 8, "n_steps": 60, "burn_in": 30, "thin": 5} if name.startswith("dynatune") else {}
    scheduler = schedulers.create_seeded(name, 0, **extra)
    start = trace.tasks
    untuned = sum(t.weight * t.default_latency for t in start)
    goal = 0.8 * untuned
    assert trace.best_reachable(0) < goal
    run = replay(trace, scheduler, seed_index=0, decision_cost=0.0, stoppers=[LatencyGoal(latency=goal)])
    assert run.stopped_by.startswith("latency goal")
    assert run.history[-1][1] <= goal < run.history[-2][1]
    run = replay(trace, schedulers.create_seeded(name, 0, **extra), seed_index=0, decision_cost=0.0,
                 stoppers=[CostBudget(trials=50)], trials_per_slot=8)
    assert run.stopped_by == "trial budget 50 spent: 56 trials" and run.final.trials == 56


# ---- create() ------------------------------------------------------------------------------------------


def test_create_builds_rules_by_name_and_the_ledger_takes_names():
    assert isinstance(stoppers.create("diminishing"), DiminishingReturns)
    assert stoppers.create("goal", latency=0.01).latency == 0.01
    ledger = Ledger(TASKS, RoundRobin(), Budget(max_trials=10), clock=lambda: 0.0, stoppers=["diminishing"])
    assert isinstance(ledger.stoppers[0], DiminishingReturns)


@pytest.mark.parametrize(("name", "kwargs", "message"), [
    ("nope", {}, "unknown stop rule 'nope'; valid names: goal, budget, diminishing"),
    ("goal", {}, "stop rule 'goal': "),
    ("goal", {"latency": -1.0}, "latency must be a positive number"),
    ("budget", {}, "set at least one of seconds, joules, trials"),
    ("budget", {"trials": 2.5}, "trials must be a positive integer"),
    ("budget", {"joules": math.inf}, "joules must be a positive number"),
    ("diminishing", {"per": "watts"}, "per must be one of seconds, joules, trials"),
    ("diminishing", {"window": 3}, "it takes: phi, per"),
])
def test_create_rejects_bad_input_in_one_line(name, kwargs, message):
    with pytest.raises(InputError) as err:
        stoppers.create(name, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)
