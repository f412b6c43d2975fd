"""Trace replay: the session's rules on recorded trials, the clock, the hindsight oracle, metrics, files."""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest

from tunewise import schedulers
from tunewise.budget import Budget
from tunewise.lab.oracles import Allocation, Oracle, OtherSeedsOracle, fastest_allocation
from tunewise.lab.replay import TaskRun, Trace, TraceTask, replay, time_to_reach, time_to_within
from tunewise.lab.synthetic import synthetic
from tunewise.schedulers import TaskScheduler
from tunewise.tuning.state import Snapshot

INF = math.inf


class Script(TaskScheduler):
    """Plays the given picks in order, keeps every snapshot it is shown, and can take its time."""

    def __init__(self, *, picks=(), delay: float = 0.0):
        self.picks = list(picks)
        self.delay = delay
        self.seen: list[Snapshot] = []

    def next(self, snapshot):
        self.seen.append(snapshot)
        end = time.perf_counter() + self.delay
        while time.perf_counter() < end:
            pass
        return self.picks.pop(0) if self.picks else None


def trace_of(*runs: tuple[list[float], list[float]], weights=None, default: float = 10.0) -> Trace:
    """One seed; task ``k`` has latencies/costs ``runs[k]``, FLOPs 1e9, default latency ``default``."""
    weights = weights or [1] * len(runs)
    tasks = tuple(TraceTask(f"t{k}", w, 1e9, default) for k, w in enumerate(weights))
    return Trace("test", tasks, (tuple(TaskRun(tuple(lat), tuple(cost)) for lat, cost in runs),))


# ---- the session's rules ------------------------------------------------------------------------------


def test_snapshots_follow_the_session_rules():
    trace = trace_of(([8.0, INF, 6.0, 7.0, 5.0], [1.0] * 5), ([9.0, 4.0, 3.0], [2.0] * 3), ([INF] * 4, [0.5] * 4))
    script = Script(picks=[0, 1, 0, 2, 1])
    run = replay(trace, script, seed_index=0, trials_per_slot=2, decision_cost=0.0, budget=Budget(per_task_trials=4,
                                                                                                  max_trials=9))
    first, *_, last = script.seen
    assert (first.elapsed, first.trials, first.slot, first.trials_per_slot) == (0.0, 0, 0, 2)
    assert (first.max_trials, first.per_task_trials, first.history) == (9, 4, ((0.0, 30.0),))
    assert all(t.best_history == () and not t.finished for t in first.tasks)
    t0, t1, t2 = run.final.tasks
    # Task 0: slots of 2 trials, best after each slot, finished once its per-task budget (4) is spent.
    assert (t0.best_history, t0.trials_history, t0.trials, t0.failures, t0.finished) == ((8.0, 6.0), (2, 4), 4, 1,
                                                                                          True)
    # Task 1: its recorded run (3 trials) ends inside its second slot: one trial, then finished.
    assert (t1.best_history, t1.trials_history, t1.finished) == ((4.0, 3.0), (2, 3), True)
    # Task 2: only failures, so best stays inf and the task counts at its default latency.
    assert (t2.best_history, t2.failures, t2.current_latency, t2.finished) == ((INF,), 2, 10.0, False)
    assert run.picks == (0, 1, 0, 2, 1) and run.final.trials == 9 and run.final.slot == 5
    # The 9-trial budget stopped the run (the script had no picks left to give anyway).
    assert len(script.seen) == 5
    assert [s.slot for s in script.seen] == [0, 1, 2, 3, 4]
    assert last.history == run.history[:-1]
    assert run.history[-1] == (run.final.elapsed, 6.0 + 3.0 + 10.0)
    assert run.final.history == run.history


def test_the_last_slot_is_cut_to_the_trial_budget():
    trace = trace_of(([5.0] * 8, [1.0] * 8), ([5.0] * 8, [1.0] * 8))
    run = replay(trace, schedulers.RoundRobin(), seed_index=0, trials_per_slot=4, decision_cost=0.0,
                 budget=Budget(max_trials=6))
    assert [t.trials_history for t in run.final.tasks] == [(4,), (2,)]
    assert run.final.elapsed == 6.0


def test_patience_counts_trials_without_improvement_as_the_session_does():
    # Improves in slots 1 and 2 (the counter restarts at 0 even if the slot's last trials did not improve),
    # then 3 trials of each further slot count: finished after 2 flat slots with patience 6.
    trace = trace_of(([5.0, 4.0, 9.0, 3.0, 9.0, 9.0] + [9.0] * 9, [1.0] * 15))
    run = replay(trace, schedulers.Sequential(), seed_index=0, trials_per_slot=3, decision_cost=0.0,
                 budget=Budget(patience=6))
    assert run.final.tasks[0].best_history == (4.0, 3.0, 3.0, 3.0)
    assert run.final.tasks[0].finished and run.final.trials == 12


def test_a_task_with_no_recorded_trials_is_finished_from_the_start():
    run = replay(trace_of(([], []), ([2.0], [1.0])), schedulers.RoundRobin(), seed_index=0, decision_cost=0.0)
    assert run.picks == (1,)
    assert run.final.tasks[0].finished and run.final.tasks[0].slots == 0


def test_choosing_a_finished_task_is_an_error():
    with pytest.raises(RuntimeError, match="finished task 0"):
        replay(trace_of(([2.0], [1.0]), ([2.0], [1.0])), Script(picks=[0, 0]), seed_index=0)


# ---- the clock ----------------------------------------------------------------------------------------


def test_the_clock_adds_the_recorded_costs_and_the_charged_decisions():
    trace = trace_of(([5.0, 4.0, 3.0], [1.0, 2.0, 4.0]), ([5.0, 1.0], [0.5, 0.25]))
    run = replay(trace, Script(picks=[0, 1, 0]), seed_index=0, trials_per_slot=2, decision_cost=0.125)
    assert [t for t, _ in run.history] == [0.0, 0.125 + 3.0, 3.125 + 0.125 + 0.75, 4.0 + 0.125 + 4.0]
    assert run.decision_times == (0.125,) * 3
    assert run.final.elapsed == 8.125  # every recorded trial used: no fourth decision
    stopped = replay(trace, Script(picks=[0]), seed_index=0, trials_per_slot=2, decision_cost=0.125)
    assert stopped.final.elapsed == 3.125 + 0.125  # the decision that returned None took its time too


def test_decisions_are_timed_when_no_cost_is_given():
    trace = trace_of(([5.0, 4.0], [1.0, 1.0]))
    run = replay(trace, Script(picks=[0, 0], delay=0.02), seed_index=0, trials_per_slot=1)
    assert all(d >= 0.02 for d in run.decision_times)
    assert run.history[-1][0] == pytest.approx(2.0 + run.decision_times[0] + run.decision_times[1])


def test_a_time_budget_is_checked_before_each_slot():
    trace = trace_of(([5.0] * 10, [1.0] * 10))
    run = replay(trace, schedulers.Sequential(), seed_index=0, trials_per_slot=4, decision_cost=0.0,
                 budget=Budget(time_budget=5.0))
    assert run.history[-1][0] == 8.0  # the second slot started at 4 s < 5 s and ran to its end


# ---- the oracle ---------------------------------------------------------------------------------------


def one_climber() -> Trace:
    """Three plateauing tasks shed 50 of their 60 ms in their first slot (16 trials) and stay flat; the
    climber (declared among them, 50 ms untuned) sheds 2 ms a slot for twenty slots, then stays at 10 ms.
    Every run has 800 trials, each a little above the curve and costing 0.5 to 1.5 s (seeded)."""
    rng = np.random.default_rng(0)
    trial = np.arange(1, 801)
    climber = 10e-3 + 40e-3 * np.clip(1 - trial / 320, 0, 1)
    flat = np.where(trial <= 16, 60e-3 - 50e-3 * trial / 16, 10e-3)
    curves = [flat, climber, flat, flat]
    tasks = tuple(TraceTask(f"t{k}", 1, 1e9, 50e-3 if k == 1 else 60e-3) for k in range(len(curves)))
    runs = tuple(TaskRun(tuple(curve * np.exp(np.abs(rng.normal(0, 0.05, curve.size)))),
                         tuple(rng.uniform(0.5, 1.5, curve.size))) for curve in curves)
    return Trace("one-climber", tasks, (runs,))


def test_dynatune_beats_the_static_schedulers_when_one_task_keeps_climbing():
    # within 5 % of the best takes 19 slots of the climber and one of each other task. Round robin and the
    # FLOPs rule (equal FLOPs here) give the climber one slot in four; sequential tunes the heaviest
    # untuned tasks, the plateauing ones, to their last recorded trial first. DynaTune tries every task,
    # fits their curves once they have a few slots, and follows the climber.
    trace = one_climber()
    best = trace.best_reachable(0)

    def time_to_goal(name: str) -> float:
        run = replay(trace, schedulers.create_seeded(name, 0), seed_index=0, decision_cost=0.0,
                     budget=Budget(max_trials=16 * 120))
        reached = time_to_within(run.history, best, 0.05)
        return math.inf if reached is None else reached

    dynatune = time_to_goal("dynatune")
    assert dynatune < 16 * 60  # 60 slots of 16 trials at 1 s a trial on average
    for name in ("round-robin", "sequential", "flops"):
        assert dynatune < 0.7 * time_to_goal(name), name


def diminishing_returns() -> Trace:
    """Each task's best falls geometrically toward its limit, so every task's gain per slot shrinks."""
    runs = []
    for start, floor, pace, cost in [(10.0, 2.0, 0.7, 1.0), (10.0, 6.0, 0.5, 0.5), (10.0, 1.0, 0.9, 2.0)]:
        runs.append(([floor + (start - floor) * pace ** (i + 1) for i in range(48)], [cost] * 48))
    return trace_of(*runs, weights=[1, 2, 1])


def test_the_oracle_is_at_least_as_good_as_every_scheduler_on_diminishing_returns():
    trace = diminishing_returns()
    best = trace.best_reachable(0)
    fast = {"n_walkers": 8, "n_steps": 40, "burn_in": 20, "thin": 4}

    def times(scheduler) -> list[float]:
        run = replay(trace, scheduler, seed_index=0, trials_per_slot=4, decision_cost=0.0)
        return [time_to_within(run.history, best, x) for x in (0.2, 0.05, 0.01)]

    oracle = times(Oracle(trace=trace, seed_index=0))
    for name in schedulers.names():
        kwargs = fast if name.startswith("dynatune") else {}
        other = times(schedulers.create_seeded(name, 0, **kwargs))
        assert all(o <= x for o, x in zip(oracle, other, strict=True)), (name, oracle, other)


def test_the_oracle_scores_a_slot_by_its_reduction_per_second():
    # Task 0's next slot saves 1 s of model latency (x weight 1) for 2 s; task 1's saves 0.5 (x weight 3) for 1 s.
    trace = trace_of(([9.0, 9.5], [1.0, 1.0]), ([9.5, 9.8], [0.5, 0.5]), weights=[1, 3])
    oracle = Oracle(trace=trace, seed_index=0)
    snap = Snapshot(replay(trace, Script(), seed_index=0).final.tasks, trials_per_slot=2)
    assert oracle.rates(snap, snap.tasks[0]).tolist() == [0.5]
    assert oracle.rates(snap, snap.tasks[1]).tolist() == [1.5]
    assert oracle.next(snap) == 1


def test_the_oracle_can_look_past_a_flat_slot():
    # Task 0 finds nothing in its first slot and a lot in its second; task 1 a little in each.
    trace = trace_of(([10.0, 10.0, 1.0, 1.0], [1.0] * 4), ([9.5, 9.5, 9.0, 9.0], [1.0] * 4))
    greedy = replay(trace, Oracle(trace=trace, seed_index=0), seed_index=0, trials_per_slot=2, decision_cost=0.0,
                    budget=Budget(max_trials=4))
    ahead = replay(trace, Oracle(trace=trace, seed_index=0, lookahead=None), seed_index=0, trials_per_slot=2,
                   decision_cost=0.0, budget=Budget(max_trials=4))
    assert greedy.picks == (1, 1) and ahead.picks == (0, 0)
    assert ahead.history[-1][1] < greedy.history[-1][1]
    # When no next slot improves anything, the one-step oracle still turns to what pays off later.
    flat = trace_of(([10.0, 10.0, 1.0, 1.0], [1.0] * 4), ([10.0] * 4, [1.0] * 4))
    assert replay(flat, Oracle(trace=flat, seed_index=0), seed_index=0, trials_per_slot=2,
                  budget=Budget(max_trials=4)).picks == (0, 0)


def test_the_oracle_rejects_a_bad_lookahead():
    with pytest.raises(ValueError, match="lookahead"):
        Oracle(trace=diminishing_returns(), seed_index=0, lookahead=0)


def seeds_of(*seeds: list[tuple[list[float], list[float]]], weights=None, default: float = 10.0) -> Trace:
    """Several seeds of the same tasks: ``seeds[s][k]`` is task ``k``'s latencies/costs in seed ``s``."""
    weights = weights or [1] * len(seeds[0])
    tasks = tuple(TraceTask(f"t{k}", w, 1e9, default) for k, w in enumerate(weights))
    return Trace("test", tasks, tuple(tuple(TaskRun(tuple(lat), tuple(cost)) for lat, cost in runs) for runs in seeds))


def test_the_other_seeds_oracle_scores_slots_by_the_other_seeds_only():
    # In the replayed seed 0, task 0's first slot finds next to nothing and task 1's a lot; in the other seeds
    # task 0 finds 9.0 or 7.0 (mean gain 2 for a mean cost of 1.5), and its second slot nothing more (mean cost 3).
    trace = seeds_of([([9.9, 9.9, 9.9, 9.9], [1.0] * 4), ([5.0] * 4, [1.0] * 4)],
                     [([9.0, 9.5, 9.9, 9.9], [1.0] * 4), ([9.0] * 4, [0.5] * 4)],
                     [([7.0, 8.0, 9.9, 9.9], [0.5] * 4), ([9.0] * 2, [0.5] * 2)])
    snap = Snapshot(replay(trace, Script(), seed_index=0).final.tasks, trials_per_slot=2)
    believer = OtherSeedsOracle(trace=trace, seed_index=0, lookahead=None)
    assert believer.rates(snap, snap.tasks[0]).tolist() == pytest.approx([2.0 / 1.5, 2.0 / 3.0])
    # Task 1's run is two slots long in seed 0; seed 2's ended after one, so it brings nothing more.
    assert believer.rates(snap, snap.tasks[1]).tolist() == pytest.approx([1.0 / 1.0, 1.0 / 1.5])
    assert believer.next(snap) == 0
    assert Oracle(trace=trace, seed_index=0).next(snap) == 1  # it sees seed 0
    # With two seeds its rates are the other seed's oracle's.
    pair = Trace("test", trace.tasks, trace.runs[:2])
    for task in snap.tasks:
        assert (OtherSeedsOracle(trace=pair, seed_index=0, lookahead=None).rates(snap, task).tolist()
                == Oracle(trace=pair, seed_index=1).rates(snap, task)[:2].tolist())


def test_the_other_seeds_oracle_needs_two_seeds():
    with pytest.raises(ValueError, match="at least 2 seeds"):
        OtherSeedsOracle(trace=diminishing_returns(), seed_index=0)


# ---- the clairvoyant bound ------------------------------------------------------------------------------


def test_the_fastest_allocation_is_the_cheapest_of_all_whole_slot_prefixes():
    trace = synthetic(n_tasks=3, trials=40, seeds=1, seed=4)
    runs, tasks = trace.runs[0], trace.tasks

    def outcome(trials):
        cost = sum(sum(r.costs[:n]) for r, n in zip(runs, trials, strict=True))
        latency = sum(t.weight * min([t.default_latency, *r.latencies[:n]]) for t, r, n in zip(tasks, runs, trials,
                                                                                              strict=True))
        return cost, latency

    everything = [outcome(trials) for trials in itertools.product((0, 16, 32, 40), repeat=3)]
    best = trace.best_reachable(0)
    for goal in (1.5 * best, 1.05 * best, 1.01 * best, best):
        found = fastest_allocation(trace, goal, seed_index=0)
        cheapest = min(cost for cost, latency in everything if latency <= goal)
        assert found.seconds == pytest.approx(cheapest, rel=1e-12)
        assert outcome(found.trials) == pytest.approx((found.seconds, found.latency), rel=1e-12)
        assert found.latency <= goal
    assert fastest_allocation(trace, 0.99 * best, seed_index=0) is None
    untuned = sum(t.weight * t.default_latency for t in tasks)
    assert fastest_allocation(trace, untuned, seed_index=0) == Allocation((0, 0, 0), 0.0, untuned)


def test_no_scheduler_reaches_a_goal_before_the_fastest_allocation():
    trace = synthetic(n_tasks=6, trials=96, seeds=2, seed=1)
    for seed_index in range(trace.seeds):
        best = trace.best_reachable(seed_index)
        bounds = {g: fastest_allocation(trace, (1 + g) * best, seed_index=seed_index).seconds
                  for g in (0.2, 0.05, 0.01)}
        contenders = [Oracle(trace=trace, seed_index=seed_index), Oracle(trace=trace, seed_index=seed_index,
                                                                         lookahead=None),
                      OtherSeedsOracle(trace=trace, seed_index=seed_index)]
        contenders += [schedulers.create_seeded(name, seed_index) for name in ("round-robin", "flops", "gradient")]
        for scheduler in contenders:
            run = replay(trace, scheduler, seed_index=seed_index, decision_cost=0.0)
            for goal, bound in bounds.items():
                assert time_to_within(run.history, best, goal) >= bound - 1e-9, (scheduler, goal)


def test_the_fastest_allocation_rejects_a_bad_slot_size():
    with pytest.raises(ValueError, match="trials_per_slot"):
        fastest_allocation(diminishing_returns(), 1.0, seed_index=0, trials_per_slot=0)


# ---- metrics, traces and files --------------------------------------------------------------------------


def test_time_to_reach_and_within():
    history = ((0.0, 10.0), (2.0, 5.0), (3.0, 2.1), (7.0, 2.0))
    assert time_to_reach(history, 5.0) == 2.0
    assert time_to_within(history, 2.0, 0.05) == 3.0
    assert time_to_within(history, 2.0, 0.01) == 7.0
    assert time_to_reach(history, 1.0) is None


def test_best_reachable_is_the_weighted_sum_of_each_tasks_best_or_default():
    trace = trace_of(([4.0, 3.0], [1.0, 1.0]), ([INF, INF], [1.0, 1.0]), ([20.0], [1.0]), weights=[2, 1, 1])
    assert trace.best_reachable(0) == 2 * 3.0 + 10.0 + 10.0


def test_save_and_load_round_trip(tmp_path):
    trace = synthetic(n_tasks=4, trials=20, seeds=2, seed=1)
    tasks = (*trace.tasks[:-1], TraceTask("failed-default", 2, 5e8, INF))
    trace = Trace(trace.model, tasks, trace.runs, {"target": "llvm", "trials": 20})
    assert any(x == INF for r in trace.runs[0] for x in r.latencies)
    path = tmp_path / "trace.json.gz"
    trace.save(str(path))
    loaded = Trace.load(str(path))
    assert loaded == trace and loaded.meta == trace.meta
    assert path.stat().st_size < 8000


def test_bad_traces_are_rejected():
    with pytest.raises(ValueError, match="costs"):
        TaskRun((1.0, 2.0), (1.0,))
    with pytest.raises(ValueError, match="latencies"):
        TaskRun((0.0,), (1.0,))
    with pytest.raises(ValueError, match="costs"):
        TaskRun((1.0,), (INF,))
    with pytest.raises(ValueError, match="task runs"):
        Trace("m", (TraceTask("a", 1, 1.0, 1.0),), ((),))


def test_synthetic_traces_are_reproducible_and_tune_down():
    a, b = synthetic(n_tasks=5, trials=64, seeds=2, seed=3), synthetic(n_tasks=5, trials=64, seeds=2, seed=3)
    assert a == b and a.seeds == 2 and a.runs[0] != a.runs[1]
    untuned = sum(t.weight * t.default_latency for t in a.tasks)
    assert a.best_reachable(0) < 0.5 * untuned
