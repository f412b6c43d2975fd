"""The live progress display: sparkline, time left under the budget, and the printed lines."""

import io

import pytest
from rich.console import Console

from tunewise.progress import LiveProgress, sparkline, time_left
from tunewise.session import Budget, SlotEvent
from tunewise.state import Snapshot, TaskView


def snapshot(elapsed: float, trials: list[int]) -> Snapshot:
    tasks = tuple(TaskView(i, f"t{i}", 1, 1e6, 1e-3, (5e-4,), (n,), n) for i, n in enumerate(trials))
    return Snapshot(tasks, elapsed, sum(trials), 1, 16, history=((0.0, 2e-3), (elapsed, 1e-3)))


def test_sparkline():
    assert sparkline([3.0, 2.0, 1.0, 1.0]) == "█▅▁▁"  # 7 steps from 1 to 3: 2 is 3.5 of them, rounded to 4
    assert sparkline([2.0, 2.0]) == "▁▁" and sparkline([]) == "" and sparkline([float("inf")]) == ""
    assert len(sparkline(range(100), width=10)) == 10


@pytest.mark.parametrize("budget,expected", [
    (Budget(max_trials=100), 60 * 3.0),  # 60 trials left at 3 s a trial
    (Budget(time_budget=200), 80.0),
    (Budget(max_trials=100, time_budget=100), 0.0),  # the time budget is spent
    (Budget(per_task_trials=30), (10 + 20 + 20) * 3.0),
    (Budget(max_trials=100, per_task_trials=40), 60 * 3.0),  # 20 + 30 + 30 left per task: 60 overall
])
def test_time_left(budget, expected):
    assert time_left(snapshot(120.0, [20, 10, 10]), budget) == pytest.approx(expected)


def test_time_left_is_unknown_before_the_first_trial():
    assert time_left(snapshot(5.0, [0]), Budget(max_trials=10)) is None


def test_printed_progress_line():
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, width=300))
    model = type("Model", (), {"tasks": (), "untuned_latency": lambda self: 2e-3})()
    progress.tuning_started(model, Budget(max_trials=80))
    progress.slot(SlotEvent(0, 0, 16, 0, 1e-3, 5e-4, 1.0, 0.5, 0.5, 0.0), snapshot(40.0, [20, 10, 10]))
    line = out.getvalue().splitlines()[-1]
    assert "elapsed 40s | trials 40/80" in line and "1.500 ms (1.3x) █▁" in line and "~40s left" in line
