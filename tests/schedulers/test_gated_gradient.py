"""The gated gradient scheduler: gradient among the tried tasks, a first slot only where it is expected to pay."""

from __future__ import annotations

import numpy as np

from tunewise import schedulers
from tunewise.lab.replay import replay
from tunewise.schedulers import GatedGradient, Gradient
from tunewise.tuning.state import Snapshot, TaskView


def test_among_tried_tasks_it_chooses_as_gradient_does():
    rng = np.random.default_rng(0)
    for _ in range(50):
        tasks = []
        for k in range(5):
            slots = int(rng.integers(1, 6))
            best = tuple(np.sort(rng.uniform(1e-4, 1e-2, slots))[::-1])
            tasks.append(TaskView(k, f"t{k}", int(rng.integers(1, 4)), 1e9, 2e-2, best,
                                  tuple(16 * (i + 1) for i in range(slots)), 16 * slots))
        snap = Snapshot(tuple(tasks))
        assert GatedGradient(seed=1).next(snap) == Gradient(seed=1).next(snap)


def test_an_untried_task_goes_first_when_its_first_slot_is_worth_more_than_the_next_tried_one():
    tried = TaskView(0, "conv", 1, 1e9, 1e-2, (1e-3, 1e-3), (16, 32), 32)  # 1 TFLOPS, flat
    heavy = TaskView(1, "big-conv", 2, 4e9, 2e-2)  # 2 x (20 - 4) ms to gain
    light = TaskView(2, "small-conv", 1, 1e6, 1e-5)  # 10 us to gain at most
    assert GatedGradient(seed=0).next(Snapshot((tried, heavy, light))) == 1
    # the heavy one tried, the light one's first slot is worth less than either tried task's next
    heavy = TaskView(1, "big-conv", 2, 4e9, 2e-2, (4e-3,), (16,), 16)
    assert GatedGradient(seed=0).next(Snapshot((tried, heavy, light))) in (0, 1)
    assert Gradient(seed=0).next(Snapshot((tried, heavy, light))) == 2


def test_it_skips_the_tasks_a_first_pass_would_waste_slots_on_and_reaches_the_goal_sooner(trace_with_layout_tasks):
    trace = trace_with_layout_tasks
    best = trace.best_reachable(0)
    runs = {name: replay(trace, schedulers.create_seeded(name, 0), seed_index=0, decision_cost=0.0)
            for name in ("gradient", "gated-gradient")}

    def reached(run) -> int:
        return next(i for i, (_, latency) in enumerate(run.history) if latency <= 1.05 * best)

    assert {k for k in runs["gradient"].picks[:reached(runs["gradient"])] if k >= 4} == set(range(4, 10))
    assert len({k for k in runs["gated-gradient"].picks[:reached(runs["gated-gradient"])] if k >= 4}) <= 2
    assert runs["gated-gradient"].history[reached(runs["gated-gradient"])][0] < \
        runs["gradient"].history[reached(runs["gradient"])][0]
