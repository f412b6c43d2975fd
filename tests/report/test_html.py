"""The interactive HTML report: figures checked against the store they were drawn from, the plotly.js bundle
beside the page, the CLI's one-line errors for bad destinations."""

import json
import math
import os
import re
from collections import Counter

import pytest

from tunewise import cli, report, stores
from tunewise.report._text import task_label
from tunewise.stores import Checkpoint, StoredTask, StoredTrial

_KINDS = ("build", "run", "timeout", "build")  # the error of every 4th trial, in turn; the others are measured
_METADATA = {"latency_s": 2e-3, "untuned_latency_s": 9e-3, "torch_eager_latency_s": 5e-3,
             "onnxruntime_latency_s": 4e-3, "latency_estimate_history": [[0.0, 9e-3], [12.0, 3e-3]]}


def _record() -> str:
    return '[[[["GetSBlock", [], ["root", "main"], ["b0"]]], []], null, null, null]'


def _fill(store, run: int, tasks: int, slots: int, artifact: bool) -> None:
    """``tasks`` tasks of long names sharing a prefix; ``slots`` slots of 4 trials, round robin over the tasks,
    every 4th trial failed; an artifact when ``artifact``."""
    w = store.commit_workload("0000000000000001", "W", lambda other: other == "W")
    store.add_tasks(run, [StoredTask(k, f"fused_conv2d_add_relu_nchw_kernel_variant_{k}", w, 1 + k % 3, 1e6,
                                     (2 + k) * 1e-3) for k in range(tasks)])
    failures = 0
    for slot in range(slots):
        task, trials = slot % tasks, []
        for n in range(4):
            failed = n == 3
            kind = _KINDS[failures % len(_KINDS)] if failed else None
            failures += failed
            trials.append(StoredTrial(w, _record(), () if failed else ((1 + task + n) * 1e-3 / (1 + slot),), kind,
                                      f"{kind} error of candidate {n}" if failed else "", task=task, slot=slot))
        store.add_trials(run, trials, Checkpoint(slot, task, 4, 2.0 * (slot + 1), 2.0, (9 - slot) * 1e-3))
    if artifact:
        store.add_artifact(run, "/artifacts/m", _METADATA)


@pytest.fixture
def store_file(tmp_path):
    """A store file with run 1 (3 tasks, 6 slots, an artifact) and run 2 (60 tasks, 3 slots, no artifact)."""
    url = f"sqlite:///{tmp_path}/tunewise.db"
    store = stores.create(url)
    _fill(store, store.create_run("m", '{"kind": "llvm", "mcpu": "znver4", "num-cores": 2}', "gradient",
                                  {"seed": 0}), 3, 6, artifact=True)
    _fill(store, store.create_run("m60", "{}", "round-robin", {}), 60, 3, artifact=False)
    return store, url


def figures(page: str) -> dict[str, dict]:
    """The plotly figures a page holds, by the id of the element they are drawn in."""
    found = re.findall(r"<script type='application/json' class='tunewise-figure' data-div='([^']+)'>(.*?)</script>",
                       page, re.S)
    return {key: json.loads(data) for key, data in found}


def _bundle(folder) -> list[str]:
    return [name for name in os.listdir(folder) if name.endswith(".js")]


def test_the_page_draws_what_the_store_holds(store_file, tmp_path):
    store, _ = store_file
    path = report.write([report.summarize(store, 1), report.summarize(store, 2)], str(tmp_path / "r.html"))
    page = open(path).read()
    [js] = _bundle(tmp_path)
    assert re.match(r"plotly-[0-9.]+\.min\.js$", js) and f"<script src='{js}'></script>" in page
    assert "cdn" not in page and len(page) < 500_000  # the bundle is not in the page
    figs = figures(page)
    assert sorted(figs) == ["latency", "run1-failures", "run1-tasks", "run1-timeline", "run2-failures",
                            "run2-tasks", "run2-timeline"]

    latency = {trace["name"]: trace for trace in figs["latency"]["data"]}
    metadata = store.get_artifacts(1)[0].metadata
    compiled = {"run 1: untuned TVM (compiled)": "untuned_latency_s", "run 1: tuned TVM (compiled)": "latency_s",
                "run 1: PyTorch eager": "torch_eager_latency_s", "run 1: onnxruntime": "onnxruntime_latency_s"}
    assert set(latency) == {"run 1: latency estimate", "run 2: latency estimate", *compiled}  # run 2: no artifact
    for (name, key), own in zip(compiled.items(), (True, True, False, False), strict=True):
        expected = [metadata[key] * 1e3] * (1 if own else 2)  # a marker, or a line over the tuning time
        assert [y for y in latency[name]["y"] if y is not None] == pytest.approx(expected)
    assert latency["run 1: tuned TVM (compiled)"]["x"] == [metadata["latency_estimate_history"][-1][0]]
    checkpoints = store.get_checkpoints(1)
    assert latency["run 1: latency estimate"]["x"][1:] == pytest.approx([c.elapsed for c in checkpoints])
    assert latency["run 1: latency estimate"]["y"][1:] == pytest.approx([c.latency * 1e3 for c in checkpoints])

    for run in (1, 2):
        tasks, trials = store.get_tasks(run), store.get_trials(run, records=False)
        curves = figs[f"run{run}-tasks"]["data"]
        tuned = {t.task for t in trials}
        assert sorted(trace["name"] for trace in curves) == sorted(
            task_label(t.index, t.name) + ("" if t.index in tuned else " (not tuned)") for t in tasks)
        for trace in curves:
            task = tasks[int(trace["name"].split()[0][1:])]
            assert task.name in trace["hovertemplate"]
            assert trace["x"] == list(range(1 + sum(t.task == task.index for t in trials)))
        [slots] = figs[f"run{run}-timeline"]["data"]
        checkpoints = store.get_checkpoints(run)
        assert slots["y"] == [task_label(c.task, tasks[c.task].name) for c in checkpoints]
        assert slots["x"] == pytest.approx([c.seconds for c in checkpoints])
        failed = Counter(report.failure_kind(t.error) for t in trials if t.error)
        drawn = {trace["name"]: sum(trace["y"]) for trace in figs[f"run{run}-failures"]["data"]}
        assert drawn == failed and set(drawn) >= {"build errors", "run errors", "timeouts"}
    assert len({trace["name"] for trace in figs["run2-tasks"]["data"]}) == 60  # every task named apart
    assert figs["run2-tasks"]["layout"].get("showlegend") is not False

    assert "<th>CPU</th><td>znver4, 2 cores</td>" in page and "<th>status</th><td>dead</td>" in page
    assert "<th>setting seed</th><td>0</td>" in page and "none: the run compiled no model" in page


def test_the_heavy_tasks_are_drawn_the_goal_marked_and_no_failure_figure_drawn_without_failures(tmp_path):
    store = stores.create("sqlite://")
    run = store.create_run("m", "{}", "gradient", {"goal": "4ms"})
    w = store.commit_workload("0000000000000001", "W", lambda other: other == "W")
    store.add_tasks(run, [StoredTask(k, f"task{k}", w, 1, 1e6, latency) for k, latency in
                          enumerate((6e-3, 3e-3, 1e-3, 0.5e-3))])  # 57 %, 29 % of the latency: 86 %
    for k in range(4):
        store.add_trials(run, [StoredTrial(w, _record(), (0.9 * store.get_tasks(run)[k].default_latency,), task=k,
                                           slot=k)], Checkpoint(k, k, 1, k + 1.0, 1.0, 9e-3))
    page = open(report.write([report.summarize(store, run)], str(tmp_path / "r.html"))).read()
    figs = figures(page)
    assert sorted(figs) == ["latency", f"run{run}-tasks", f"run{run}-timeline"] and "No candidate failed." in page
    drawn = {trace["name"]: trace.get("visible", True) for trace in figs[f"run{run}-tasks"]["data"]}
    assert drawn == {"#0 task0": True, "#1 task1": True, "#2 task2": "legendonly", "#3 task3": "legendonly"}
    [goal] = [trace for trace in figs["latency"]["data"] if trace["name"] == f"run {run}: goal"]
    assert goal["y"] == [4.0, 4.0] and goal["x"] == [0.0, 4.0]
    assert figs["latency"]["layout"]["yaxis"]["type"] == "log"


def test_the_bundle_is_written_once_per_folder(store_file, tmp_path, capsys):
    _, url = store_file
    assert cli.main(["report", "1", "-o", str(tmp_path / "a.html"), "--store", url]) == 0
    [js] = _bundle(tmp_path)
    first = os.stat(tmp_path / js)
    assert first.st_size > 1_000_000 and first.st_mode & 0o044  # readable by a web server, as the page
    assert cli.main(["report", "2", "1", "-o", str(tmp_path / "b.html"), "--store", url]) == 0
    assert _bundle(tmp_path) == [js]
    again = os.stat(tmp_path / js)
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    for page in ("a.html", "b.html"):
        assert f"<script src='{js}'></script>" in (tmp_path / page).read_text()
    assert capsys.readouterr().out.splitlines() == [f"wrote {tmp_path / 'a.html'}", f"wrote {tmp_path / 'b.html'}"]


def test_a_bundle_that_cannot_be_written_is_one_line(store_file, tmp_path, capsys):
    from tunewise.report._html import plotly_js_name

    (tmp_path / plotly_js_name()).mkdir()  # a folder where the bundle goes
    code = cli.main(["report", "1", "-o", str(tmp_path / "r.html"), "--store", store_file[1]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"tunewise: error: cannot write the plotly.js bundle {tmp_path / plotly_js_name()}: "
                                 "it is a folder"]
    assert not os.path.exists(tmp_path / "r.html")


def test_a_report_of_an_unknown_kind_is_refused_before_the_store_is_read(tmp_path, capsys):
    code = cli.main(["report", "1", "-o", str(tmp_path / "r.txt"), "--store", f"sqlite:///{tmp_path}/none.db"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"tunewise: error: cannot write a report to {tmp_path / 'r.txt'}: "
                                 "name an .html, .png, .svg or .pdf file"]


@pytest.mark.tvm
def test_a_real_tuned_and_compiled_run(tmp_path, cli_run):
    url = cli_run[0]
    assert cli.main(["report", "1", "-o", str(tmp_path / "r.html"), "--store", url]) == 0
    store = stores.create(url)
    figs = figures((tmp_path / "r.html").read_text())
    [artifact] = store.get_artifacts(1)
    latency = {trace["name"]: trace["y"] for trace in figs["latency"]["data"]}
    for key, name, own in report.COMPILED:
        if artifact.metadata.get(key) is not None:
            name = f"run 1: {name}" + (" (compiled)" if own else "")
            assert [y for y in latency[name] if y is not None] == pytest.approx(
                [artifact.metadata[key] * 1e3] * (1 if own else 2))
    assert "run 1: tuned TVM (compiled)" in latency
    assert "run 1: untuned TVM (compiled)" not in latency  # not timed unless asked (--time-untuned)
    tasks, tuned = store.get_tasks(1), {t.task for t in store.get_trials(1, records=False)}
    assert sorted(trace["name"] for trace in figs["run1-tasks"]["data"]) == sorted(
        task_label(t.index, t.name) + ("" if t.index in tuned else " (not tuned)") for t in tasks)
    assert len(figs["run1-timeline"]["data"][0]["y"]) == len(store.get_checkpoints(1))
    failed = Counter(report.failure_kind(t.error) for t in store.get_trials(1, records=False) if t.error)
    if failed:
        assert {trace["name"]: sum(trace["y"]) for trace in figs["run1-failures"]["data"]} == failed
    else:
        assert "run1-failures" not in figs and "No candidate failed." in (tmp_path / "r.html").read_text()
    assert all(math.isfinite(y) for y in latency["run 1: latency estimate"])
    assert f"<th>status</th><td>{stores.FINISHED}</td>" in (tmp_path / "r.html").read_text()
