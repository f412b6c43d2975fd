"""The fleet simulator: its clock against single-model replays, conservation of work, suspension's effect on
a made-up population, and the scaling table's worker counts."""

from __future__ import annotations

import math
import re

import pytest

from tunewise import schedulers
from tunewise.lab.fleet import FleetModel, doubling, fleet_of, simulate
from tunewise.lab.replay import TaskRun, Trace, TraceTask, replay, time_to_reach
from tunewise.lab.synthetic import synthetic


def one_task(name: str, latencies: list[float], cost: float = 10.0) -> Trace:
    """A model of one task (default latency 1 s) whose trials measure ``latencies``, ``cost`` seconds each."""
    run = TaskRun(tuple(latencies), (cost,) * len(latencies))
    return Trace(name, (TraceTask("t", 1, 1e9, 1.0),), ((run,),))


def test_one_model_on_one_worker_reaches_its_goal_when_its_own_replay_does():
    trace = synthetic(n_tasks=4, trials=48, seeds=1, seed=3)
    goal = 1.2 * trace.best_reachable(0)
    alone = replay(trace, schedulers.create_seeded("gradient", 0), seed_index=0, decision_cost=0.0)
    run = simulate([FleetModel(trace, 0, goal)], "fair", workers=1, round_seconds=45.0)
    assert run.reached[0] == pytest.approx(time_to_reach(alone.history, goal))
    assert run.wall == pytest.approx(run.busy) and run.utilisation == pytest.approx(1.0)


def test_every_model_does_the_same_work_whatever_the_policy_and_the_workers():
    fleet = fleet_of([synthetic(n_tasks=3, trials=32, seeds=2, seed=s) for s in (0, 1)], 4, within=0.2)
    runs = [simulate(fleet, policy, workers=w, round_seconds=30.0) for policy in ("fair", "suspension")
            for w in (1, 2, 4)]
    assert len({round(r.busy, 6) for r in runs}) == 1 and len({r.trials for r in runs}) == 1
    one, four = runs[0], runs[2]
    assert one.all_reached == pytest.approx(one.wall)  # one worker: the last goal is reached at the very end
    assert four.wall < one.wall and four.suspensions == 0 and 0 < four.utilisation <= 1.0
    assert all(r.store_load > 0 for r in runs)


def test_suspension_gives_the_worker_to_the_model_that_pays_off():
    # "quick" halves its latency at once and reaches its goal after 6 trials; "slow" creeps for 40 trials
    quick = one_task("quick", [0.5, 0.45, 0.4, 0.35, 0.3, 0.3])
    slow = one_task("slow", [1.0 - 0.01 * i for i in range(1, 41)])
    fleet = [FleetModel(slow, 0, 0.61), FleetModel(quick, 0, 0.31)]
    fair = simulate(fleet, "fair", workers=1, round_seconds=20.0, trials_per_slot=2)
    trimmer = simulate(fleet, "suspension", workers=1, round_seconds=20.0, trials_per_slot=2)
    assert trimmer.reached[1] == 80.0 and fair.reached[1] == 120.0  # 3 rounds of its own against 6 turns
    assert trimmer.suspensions > 0 and trimmer.wall == pytest.approx(fair.wall)
    # after 4 rounds (80 s) quick is at its goal under suspension; fair shares left it at 0.35
    assert trimmer.gap_at(80.0) == pytest.approx(math.sqrt(0.98 / 0.61 * 0.3 / 0.31))
    assert fair.gap_at(80.0) == pytest.approx(math.sqrt(0.96 / 0.61 * 0.35 / 0.31))
    assert fair.gap_at(0.0) == pytest.approx(math.sqrt(1 / 0.61 * 1 / 0.31))


def test_fleets_take_traces_and_seeds_in_turn_and_worker_counts_double():
    a, b = synthetic(n_tasks=2, trials=8, seeds=2, seed=0), synthetic(n_tasks=2, trials=8, seeds=1, seed=1)
    fleet = fleet_of([a, b], 4, within=0.1)
    assert [(m.trace, m.seed_index) for m in fleet] == [(a, 0), (b, 0), (a, 1), (a, 0)]
    assert fleet[2].goal == pytest.approx(1.1 * a.best_reachable(1))
    assert doubling(256) == [1, 2, 4, 8, 16, 32, 64, 128, 256] and doubling(3) == [1, 2]
    with pytest.raises(ValueError, match=re.escape("workers must be >= 1 and round_seconds > 0, got 0 and 60.0")):
        simulate(fleet, "fair", workers=0)
