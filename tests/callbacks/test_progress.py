"""The live progress display: sparkline, time left under the budget, and the printed lines."""

import dataclasses
import io

import pytest
from rich.console import Console

from tunewise.budget import Budget
from tunewise.callbacks import SlotEvent
from tunewise.callbacks._progress import NAME_WIDTH, LiveProgress, forecast_text, shorten, sparkline, time_left
from tunewise.tuning.state import Snapshot, TaskView

EVENT = SlotEvent(slot=0, task=0, trials=16, failures=0, best_before=1e-3, best_after=5e-4, seconds=1.0,
                  search_seconds=0.5, measure_seconds=0.5, decision_seconds=0.0)

def snapshot(elapsed: float, trials: list[int]) -> Snapshot:
    tasks = tuple(TaskView(i, f"t{i}", 1, 1e6, 1e-3, (5e-4,), (n,), n) for i, n in enumerate(trials))
    return Snapshot(tasks, elapsed, sum(trials), 1, 16, history=((0.0, 2e-3), (elapsed, 1e-3)))


def test_sparkline():
    assert sparkline([3.0, 2.0, 1.0, 1.0]) == "█▅▁▁"  # log scale from 1 to 3: 2 is 4.4 of 7 steps
    assert sparkline([2.0, 2.0]) == "██" and sparkline([]) == "" and sparkline([float("inf")]) == ""
    assert len(sparkline(range(100), width=10)) == 10


def test_sparkline_is_scaled_to_the_untuned_latency():
    assert sparkline([1.0, 0.992, 0.992], top=1.0) == "███"  # a 0.8 % gain is no cliff
    assert sparkline([1.0, 0.5], top=1.0) == "█▁"  # a 2x gain spans the range
    assert sparkline([0.5, 0.25], top=1.0) == "▅▁"  # half way down the log scale: 3.5 of 7 steps, to 4
    assert sparkline([1.0, 0.25, 0.125], top=1.0) == "█▃▁"


def test_long_task_names_keep_what_tells_them_apart():
    a = "fused_conv2d_add_relu_nn_max_pool2d_layout_transform_add_relu_1"
    b = "fused_conv2d_add_relu_nn_max_pool2d_layout_transform_add_relu_2"
    assert len(shorten(a)) == NAME_WIDTH and shorten(a) != shorten(b)
    assert shorten(a).startswith("fused_conv2d") and "…" in shorten(a) and shorten("short") == "short"


def test_slot_in_flight_is_shown_on_a_terminal():
    progress = LiveProgress(Console(file=io.StringIO(), force_terminal=True, width=200))
    model = type("Model", (), {"tasks": (), "untuned_latency": lambda self: 2e-3, "defaults_measured": True})()
    progress.tuning_started(model, Budget(max_trials=80))
    try:
        progress.slot_phase(snapshot(0.0, [0, 0]), 1, "search")
        progress.slot_phase(snapshot(0.0, [0, 0]), 1, "build")
        screen = Console(file=io.StringIO(), width=200)
        screen.print(progress._render())
        assert "slot 1 in flight: t1 | build 0s" in screen.file.getvalue()
    finally:
        progress.tuning_finished()


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
    model = type("Model", (), {"tasks": (), "untuned_latency": lambda self: 2e-3, "defaults_measured": True})()
    progress.tuning_started(model, Budget(max_trials=80))
    progress.slot_recorded(EVENT, snapshot(40.0, [20, 10, 10]))
    line = out.getvalue().splitlines()[-1]
    # untuned: the snapshot's three tasks at 1 ms each; the sparkline's top bar is that 3 ms
    assert "elapsed 40s | trials 40/80" in line and "1.500 ms (2.0x) ▅▁ | ~40s left" in line
    # a whole-model check at 40 s measured 1.8 ms where the estimate was 1 ms: the model runs 0.8 ms slower
    checked = dataclasses.replace(snapshot(40.0, [20, 10, 10]), measured=((40.0, 1.8e-3),))
    progress.slot_recorded(dataclasses.replace(EVENT, slot=1), checked)
    line = out.getvalue().splitlines()[-1]
    assert "1.500 ms (2.0x) ▅▁, 2.300 ms in the model as last checked | ~40s left" in line


def test_a_check_read_from_the_previous_checks_model_says_so():
    from tunewise.stores import ModelLatency

    out = io.StringIO()
    progress = LiveProgress(Console(file=out, width=300))
    progress.model_measured(ModelLatency(125.0, 400, 12e-3, 20.0, timed=12e-3, to_previous=0.6), snapshot(125.0, [1]))
    assert out.getvalue().splitlines()[-1].endswith("at 2m05s of tuning: 12.000 ms (the check took 20s)")
    progress.model_measured(ModelLatency(250.0, 800, 11e-3, 20.0, timed=16e-3, to_previous=0.9), snapshot(250.0, [1]))
    assert out.getvalue().splitlines()[-1].endswith(
        "at 4m10s of tuning: 11.000 ms, from the previous check's model timed beside it: 16.000 ms itself, in a "
        "slow stretch of the machine (the check took 20s)")


def test_energy_and_a_quick_start_are_shown():
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, width=300))
    model = type("Model", (), {"tasks": (1, 2), "untuned_latency": lambda self: 2e-3, "defaults_measured": False})()
    progress.tuning_started(model, Budget(max_trials=80))
    assert "tuning 2 tasks; the heaviest by FLOPs first, then every task's default latency" in out.getvalue()
    progress.slot_recorded(dataclasses.replace(EVENT, joules=200.0, run_joules=1500.0, joules_estimated=True),
                           snapshot(40.0, [20, 10, 10]))
    assert "elapsed 40s, 1.5 kJ (est.) | trials 40/80" in out.getvalue().splitlines()[-1]


def test_printed_lines_do_not_wrap_off_a_terminal():
    out = io.StringIO()
    progress = LiveProgress(Console(file=out))  # not a terminal: rich would wrap at 80 columns
    model = type("Model", (), {"tasks": (), "untuned_latency": lambda self: 2e-3, "defaults_measured": True})()
    progress.tuning_started(model, Budget(max_trials=80))
    progress.slot_recorded(EVENT, snapshot(40.0, [20, 10, 10]))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and len(lines[-1]) > 80 and lines[-1].startswith("  slot    0 t0")


@pytest.mark.tvm
def test_the_python_api_shows_the_live_progress_when_asked(capsys, tmp_path):
    import tunewise
    from tunewise.job import workflow

    tunewise.tune("tiny-mlp", budget=Budget(max_trials=4), trials_per_slot=4, progress=True, compare_torch=False,
                  timing_rounds=3, store=f"sqlite:///{tmp_path}/tunewise.db", output=str(tmp_path / "out"))
    shown = capsys.readouterr().err
    assert "tuning 2 tasks" in shown and "  slot    0 fused_matmul" in shown
    # by default only on a terminal or in a notebook: not under pytest's captured output
    assert workflow._callbacks((), None).callbacks == []
    assert [type(c) for c in workflow._callbacks((), True).callbacks] == [LiveProgress]


def test_the_forecast_is_shown_once_calibrated():
    from tunewise.forecast import END_LEVELS, Forecast

    def forecast(elapsed):
        return Forecast(4, elapsed, (elapsed, 400.0), (11e-3, 9.1e-3), (11e-3, 9.8e-3), (11e-3, 10.9e-3),
                        tuple(9e-3 + 2e-3 * q for q in END_LEVELS), goal=10e-3)

    assert forecast_text(forecast(250.0)) == (" | ~9.8 ms at budget end (80 %: 9.1-10.9); "
                                              "goal 10 ms in ~2m30s (80 %: 2m30s-never)")
    assert forecast_text(forecast(150.0)) == "" and forecast_text(None) == ""  # under half the budget spent
    checked = Forecast(**{**vars(forecast(250.0)), "gap": 1e-3})  # after a whole-model check: of the model
    assert forecast_text(checked).startswith(" | ~9.8 ms in the model at budget end (80 %: 9.1-10.9)")
