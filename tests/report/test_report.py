"""Run summaries, tables and plots, from synthetic stores (exact numbers) and from real tuning runs."""

import math

import pytest

from tunewise import report, stores
from tunewise.errors import InputError
from tunewise.stores import Checkpoint, StoredTask, StoredTrial


def _record() -> str:
    return '[[[["GetSBlock", [], ["root", "main"], ["b0"]]], []], null, null, null]'


@pytest.fixture
def synthetic():
    """Two tasks: task 0 (weight 2) improves 4 -> 1 ms in 2 slots; task 1 (1 ms default) fails once, then 3 ms."""
    store = stores.create("sqlite://")
    run = store.create_run("m", "cpu", "gradient", {})
    w = store.commit_workload("0000000000000001", "W", lambda other: other == "W")
    store.add_tasks(run, [StoredTask(0, "dense", w, 2, 1e6, 4e-3), StoredTask(1, "relu", w, 1, 0.0, 1e-3)])

    def t(task, slot, latency):
        return StoredTrial(w, _record(), () if latency is None else (latency,), None if latency else "build",
                           task=task, slot=slot)

    store.add_trials(run, [t(0, 0, 3e-3), t(0, 0, 2e-3)], Checkpoint(0, 0, 2, 6.0, 6.0, 5e-3))
    store.add_trials(run, [t(1, 1, None), t(1, 1, 3e-3)], Checkpoint(1, 1, 2, 8.0, 2.0, 5e-3))
    store.add_trials(run, [t(0, 2, 1e-3)], Checkpoint(2, 0, 1, 10.0, 2.0, 3e-3))
    return store, run


def test_summary_numbers(synthetic):
    store, run = synthetic
    s = report.summarize(store, run)
    assert (s.trials, s.failures, s.elapsed) == (5, 1, 10.0)
    assert s.untuned == pytest.approx(9e-3) and s.estimate == pytest.approx(3e-3)  # 2 * 1 ms + 1 ms (default)
    assert s.curve == ((0.0, pytest.approx(9e-3)), (6.0, 5e-3), (8.0, 5e-3), (10.0, 3e-3))
    dense, relu = s.tasks
    assert (dense.trials, dense.failures, dense.best, dense.seconds) == (3, 0, 1e-3, 8.0)
    assert dense.curve == ((1, 3e-3), (2, 2e-3), (3, 1e-3))
    assert (relu.trials, relu.failures, relu.best) == (2, 1, 3e-3) and relu.curve == ((1, math.inf), (2, 3e-3))
    assert dense.latency_share == pytest.approx(2 / 3) and relu.latency_share == pytest.approx(1 / 3)
    assert dense.time_share == pytest.approx(0.8) and relu.time_share == pytest.approx(0.2)
    table = "\n".join(report.run_table(s))
    assert "5 trials (1 failed) in 10s" in table and "9.000 -> 3.000 ms (3.00x)" in table
    assert s.calibrated == s.estimate and "in the model" not in table  # no whole-model check
    assert "dense" in table and "66.7" in table and "80.0" in table
    [header, line] = report.runs_table([s])
    assert line.split()[:4] == [str(run), "dead", "m", "gradient"]  # running, with no live owner


def test_energy_failures_and_measured_latencies_are_shown(tmp_path):
    store = stores.create("sqlite://")
    run = store.create_run("m", "cpu", "survey", {"energy_meter": "estimate"})
    w = store.commit_workload("0000000000000001", "W", lambda other: other == "W")
    store.add_tasks(run, [StoredTask(0, "dense", w, 1, 1e6, 4e-3)])

    def t(latency, error=None, seconds=1.0):
        return StoredTrial(w, _record(), () if error else (latency,), error, task=0, slot=0, build_seconds=seconds,
                           run_seconds=seconds)

    # four trials, 8 s of building and running in all, 4 s of it the two failures
    store.add_trials(run, [t(2e-3), t(None, "build", 0.75), t(None, "timeout", 1.25), t(1e-3)],
                     Checkpoint(0, 0, 4, 9.0, 9.0, 1e-3, joules=90.0, phase_joules=(10.0, 50.0, 25.0)))
    store.add_model_latency(run, stores.ModelLatency(9.0, 4, 1.5e-3, 6.0, 30.0))
    s = report.summarize(store, run)
    assert s.joules == pytest.approx(120.0) and s.measured[0].latency == 1.5e-3
    assert s.waste_seconds == pytest.approx(4.0) and s.waste_joules == pytest.approx(90.0 * 4.0 / 8.0)
    table = "\n".join(report.run_table(s))
    assert ("energy 0.12 kJ, metered by estimate (CPU, estimated from CPU time); slots: search 0.01 kJ, build 0.05 kJ, "
            "measure 0.03 kJ") in table
    assert "failed candidates: 1 build, 1 timeout; they cost 4.0s of building and running, 0.04 kJ" in table
    page = open(report.write([s], str(tmp_path / "r.html"))).read()
    assert "measured while tuning" in page and "1.5000 ms at 9 s" in page and "0.12 kJ, metered by estimate" in page
    assert "model latency measured while tuning: 1.500 ms at 9s" in table
    # the estimate then was 1 ms: the model ran 0.5 ms slower than estimated, and the estimate shown says so
    assert s.calibrated == pytest.approx(1.5e-3) and "4.000 -> 1.000 ms (4.00x), 1.500 ms in the model" in table


def test_an_import_has_no_model_estimate(synthetic):
    store, _ = synthetic
    run = store.create_run("/records", "cpu", "import", {}, status=stores.IMPORTED)
    s = report.summarize(store, run)
    assert s.tasks == () and s.estimate == math.inf and "estimate" not in report.run_table(s)[1]
    assert report.runs_table([s])[1].split()[7:9] == ["-", "-"]


def test_report_files(synthetic, tmp_path):
    store, run = synthetic
    summaries = [report.summarize(store, run)] * 2
    assert report.write(summaries, str(tmp_path / "r.png")) == str(tmp_path / "r.png")
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = open(report.write(summaries, str(tmp_path / "r.html"))).read()
    assert page.count("class='tunewise-figure'") == 1 + 3 * 2 and page.count("<pre>") == 2 and "dense" in page
    with pytest.raises(InputError, match=".html, .png"):
        report.write(summaries, str(tmp_path / "r.txt"))


def _many_tasks(tasks: int, runs: int):
    """``runs`` runs of ``tasks`` tasks whose names share a 34-character prefix, each task measured once."""
    store = stores.create("sqlite://")
    w = store.commit_workload("0000000000000001", "W", lambda other: other == "W")
    for _ in range(runs):
        run = store.create_run("m", "cpu", "gradient", {})
        store.add_tasks(run, [StoredTask(k, f"fused_conv2d_add_relu_nchw_kernel_{k}", w, 1 + k % 4, 1e6,
                                         (1 + k) * 1e-3) for k in range(tasks)])
        for k in range(tasks):
            store.add_trials(run, [StoredTrial(w, _record(), ((1 + k) * 5e-4,), task=k, slot=k)],
                             Checkpoint(k, k, 1, k + 1.0, 1.0, 1e-3))
    return [report.summarize(store, run.id) for run in store.get_runs()]


def _assert_readable(fig) -> None:
    """Every axes draws something visible (a line of one point is drawn only by its marker), and the figure fits
    a 1600 x 1200 screen at the report's 110 dpi."""
    for ax in fig.axes:
        assert ax.get_lines() or ax.patches or ax.collections, ax.get_title()
        for line in ax.get_lines():
            assert len(line.get_xdata()) > 1 or line.get_marker() not in (None, "None", ""), ax.get_title()
    width, height = fig.get_size_inches() * 110
    assert width <= 1600 and height <= 1200


@pytest.mark.parametrize("runs", [1, 2])
def test_the_figure_has_a_panel_per_task_that_holds_much_of_the_latency(runs):
    summaries = _many_tasks(14, runs)  # task k holds (1 + k) / 105 of the latency
    fig = report.figure(summaries)
    curves, *panels = fig.axes
    assert curves.get_yscale() == "log" and all(ax.get_yscale() == "log" for ax in panels)
    heaviest = sorted(summaries[0].tasks, key=lambda t: -t.latency_share)[:8]  # 8 of them hold 76 %, under 80 %
    assert report.heavy_tasks(summaries) == [t.name for t in heaviest]
    assert [ax.get_title().split("\n")[0].split()[0] for ax in panels] == [f"#{t.index}" for t in heaviest]
    assert all(len(ax.get_lines()) == runs for ax in panels)  # one line per run, in its colour
    assert {line.get_color() for ax in panels for line in ax.get_lines()} == {f"C{i}" for i in range(runs)}
    _assert_readable(fig)  # no failures: no failure panel


def test_eight_task_panels_and_the_failures_fit_a_screen():
    import dataclasses

    [summary] = _many_tasks(14, 1)
    failing = dataclasses.replace(summary.tasks[0], failures=3)
    summary = dataclasses.replace(summary, failures=3, tasks=(failing, *summary.tasks[1:]))
    fig = report.figure([summary])
    assert len(fig.axes) == 1 + 8 + 1 and fig.axes[-1].get_title() == "failed candidates (3 in all)"
    _assert_readable(fig)


def test_a_heavy_task_not_yet_tuned_gets_a_panel_that_says_so():
    store = stores.create("sqlite://")
    run = store.create_run("m", "cpu", "gradient", {})
    w = store.commit_workload("0000000000000001", "W", lambda other: other == "W")
    store.add_tasks(run, [StoredTask(0, "dense", w, 1, 1e6, 40e-3), StoredTask(1, "winograd", w, 1, 1e6, 56e-3)])
    store.add_trials(run, [StoredTrial(w, _record(), (1e-3,), task=0, slot=0)], Checkpoint(0, 0, 1, 9.0, 9.0, 57e-3))
    fig = report.figure([report.summarize(store, run)])
    panel = next(ax for ax in fig.axes[1:] if "winograd" in ax.get_title())
    assert [t.get_text() for t in panel.texts] == ["not tuned: its default schedule, 56 ms"]
    _assert_readable(fig)


def test_the_panels_stop_at_the_tasks_that_hold_80_percent():
    summaries = _many_tasks(3, 1)  # shares 1/6, 2/6, 3/6: the two heaviest hold 83 %
    assert report.heavy_tasks(summaries) == [t.name for t in summaries[0].tasks[::-1][:2]]
    assert len(report.figure(summaries).axes) == 1 + 2


def test_the_figure_marks_checks_references_goal_and_failures(tmp_path):
    store = stores.create("sqlite://")
    run = store.create_run("m", "cpu", "gradient", {"goal": "0.9x-ort"})
    w = store.commit_workload("0000000000000001", "W", lambda other: other == "W")
    store.add_tasks(run, [StoredTask(0, "dense", w, 1, 1e6, 400e-3), StoredTask(1, "relu", w, 1, 0.0, 1e-3)])
    store.add_trials(run, [StoredTrial(w, _record(), (), "build", task=0, slot=0),
                           StoredTrial(w, _record(), (20e-3,), task=0, slot=0)], Checkpoint(0, 0, 2, 60.0, 60.0, 21e-3))
    store.add_trials(run, [StoredTrial(w, _record(), (0.5e-3,), task=1, slot=1)],
                     Checkpoint(1, 1, 1, 90.0, 30.0, 20e-3))
    store.add_model_latency(run, stores.ModelLatency(90.0, 3, 26e-3, 6.0, None))
    store.add_artifact(run, str(tmp_path / "a"), {
        "latency_s": 25e-3, "onnxruntime_latency_s": 30e-3, "torch_eager_latency_s": 50e-3,
        "latency_estimate_history": [[0.0, 401e-3], [90.0, 20.5e-3]]})
    summary = report.summarize(store, run)
    assert summary.goal == pytest.approx(27e-3)  # 0.9 times the onnxruntime latency its artifact timed
    fig = report.figure([summary])
    curves = fig.axes[0]
    labels = [line.get_label() for line in curves.get_lines()]
    assert labels == [f"{summary.label}: estimate", f"run {run}: whole-model checks",
                      f"run {run}: compiled model, 25 ms", f"run {run}: onnxruntime, 30 ms",
                      f"run {run}: PyTorch eager, 50 ms", f"run {run}: goal 27 ms"]
    flat = {line.get_label(): line.get_ydata()[0] for line in curves.get_lines()[3:]}  # horizontal lines, in ms
    assert list(flat.values()) == pytest.approx([30.0, 50.0, 27.0])
    assert curves.get_yscale() == "log" and curves.get_ylim()[0] < 20.5 and curves.get_ylim()[1] > 401
    failures = fig.axes[-1]
    assert failures.get_title() == "failed candidates (1 in all)" and [p.get_width() for p in failures.patches] == [1]
    _assert_readable(fig)


@pytest.mark.tvm
def test_two_schedulers_on_the_same_axes(tuned_store, tmp_path):
    import matplotlib.image

    store, sessions, _ = tuned_store
    summaries = [report.summarize(store, s.run_id) for s in sessions]
    for summary, s in zip(summaries, sessions, strict=True):
        assert summary.trials == len(s.trials) and summary.curve == tuple(s.history)
        assert summary.estimate == pytest.approx(s.snapshot().estimated_latency())
        assert sum(t.latency_share for t in summary.tasks) == pytest.approx(1.0)
    fig = report.figure(summaries)
    curves = fig.axes[0]
    assert [line.get_label() for line in curves.get_lines()] == [f"{s.label}: estimate" for s in summaries]
    _assert_readable(fig)
    path = report.write(summaries, str(tmp_path / "compare.png"))
    height, width, _ = matplotlib.image.imread(path).shape
    assert 1000 < width <= 1600 and 500 < height <= 1200


def test_calibrated_forecasts_are_shown_as_they_stood_at_moments_of_the_run():
    from tunewise.forecast import END_LEVELS, Forecast

    store = stores.create("sqlite://")
    run = store.create_run("m", "cpu", "dynatune", {})
    w = store.commit_workload("0000000000000001", "W", lambda other: other == "W")
    store.add_tasks(run, [StoredTask(0, "dense", w, 1, 1e6, 4e-3)])

    def forecast(slot, elapsed):
        return Forecast(slot, elapsed, (elapsed, 100.0), (3e-3, 1.5e-3), (3e-3, 2e-3), (3e-3, 2.5e-3),
                        tuple(1.4e-3 + 1.2e-3 * q for q in END_LEVELS), goal=2e-3)

    for slot, elapsed in enumerate((30.0, 50.0, 70.0, 100.0)):  # 30 s: under half the budget, not shown
        store.add_trials(run, [StoredTrial(w, _record(), (3e-3,), task=0, slot=slot)],
                         Checkpoint(slot, 0, 1, elapsed, 10.0, 3e-3, forecast=forecast(slot, elapsed)))
    summary = report.summarize(store, run)
    assert [f.slot for f in summary.forecasts()] == [1, 2, 3]  # at 25 % (none calibrated yet), 50 %, 75 %, last
    lines = [line for line in report.run_table(summary) if line.startswith("forecast")]
    assert lines[0] == ("forecast after 50s (slot 1), budget end at 100s: ~2 ms at budget end (80 %: 1.5-2.5); "
                        "goal 2 ms in ~50s (80 %: 50s-never)")
    figure = report.latency_figure([summary])
    assert [t.name for t in figure.data if t.name and "forecast" in t.name] == [
        f"run {run}: forecast at {s} s{band}" for s in (50, 70, 100) for band in (" (80 %)", "")]
