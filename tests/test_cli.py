"""The command line: bad input is one line on stderr with exit code 2; the happy path end to end."""

import json
import os
import subprocess
import sys

import pytest

from tunewise import cli, stores, timing


def _one_line_error(capsys, argv):
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tunewise: error: "), err
    return lines[0]


@pytest.mark.parametrize("argv,expected", [
    (["tune", "no-such-model"], "unknown model 'no-such-model'"),
    (["tune", "/nonexistent/model.onnx"], "no such model file"),
    (["tune", "tiny-mlp", "--trials", "0"], "--trials"),
    (["tune", "tiny-mlp", "--trials", "many"], "--trials"),
    (["tune", "tiny-mlp", "--time-budget", "soon"], "time budget"),
    (["tune", "tiny-mlp", "--scheduler", "fastest"], "fastest"),
    (["tune", "tiny-mlp", "--target", "llvm -mcpu=znver3"], "option strings"),
    (["tune", "tiny-mlp", "--target", "{broken"], "not valid JSON"),
    (["tune", "tiny-mlp", "--graph-level", "max"], "graph level"),
    (["tune", "tiny-mlp", "--input-shape", "x=a"], "--input-shape"),
    (["tasks", "tiny-mlp", "--input-shape", "x=2,64"], "tiny-mlp has a fixed shape for input 'x' (it takes x (1, 64))"),
    (["run", "/nonexistent/artifact"], "not a tunewise artifact"),
    (["frobnicate"], "invalid choice"),
    (["tune", "tiny-mlp", "--evaluator", "stopwatch"], "stopwatch"),
    (["tune", "tiny-mlp", "--cost-model", "oracle"], "oracle"),
    (["streams", "resnet19"], "unknown zoo model"),
    (["tune"], "name a model to tune, or --resume RUN"),
    (["tune", "--resume", "1", "--scheduler", "random"], "drop --scheduler"),
    (["tune", "tiny-mlp", "--store", "nonsense"], "bad store URL"),
    (["runs", "--store", "sqlite:////nonexistent/tunewise.db"], "no store at"),
    (["show", "x"], "bad RUN"),
    (["records", "import"], "required"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, expected):
    assert expected in _one_line_error(capsys, argv)


def test_corrupt_onnx_is_one_line(capsys, tmp_path):
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(b"garbage")
    assert "not a valid ONNX model" in _one_line_error(capsys, ["tasks", str(path)])


def test_duration_parsing():
    assert cli.parse_duration("90") == 90 and cli.parse_duration("10m") == 600 and cli.parse_duration("1.5h") == 5400


def test_no_traceback_from_a_real_process(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tunewise.cli", "tune", str(tmp_path / "x.onnx")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.tvm
def test_tasks_tune_and_run_end_to_end(capsys, tmp_path):
    assert cli.main(["tasks", "tiny-mlp"]) == 0
    listing = capsys.readouterr().out
    assert "fused_matmul" in listing and "2 tasks" in listing

    out, url = str(tmp_path / "artifact"), f"sqlite:///{tmp_path}/tunewise.db"
    assert cli.main(["tune", "tiny-mlp", "--trials", "8", "--trials-per-slot", "4", "-o", out, "--store", url]) == 0
    summary = capsys.readouterr().out
    assert "match the reference" in summary and "PyTorch eager" in summary and "run 1" in summary
    assert "onnxruntime " in summary and f"timed as         {timing.DESCRIPTION}" in summary
    metadata = json.load(open(os.path.join(out, "metadata.json")))
    assert metadata["trials"] == 8 and metadata["model"] == "tiny-mlp" and metadata["run"] == 1
    assert metadata["inputs"] == [{"name": "x", "shape": [1, 64], "dtype": "float32"}]
    assert metadata["timing"] == timing.DESCRIPTION and metadata["onnxruntime_latency_s"] > 0
    store = stores.create(url)
    assert len(store.get_trials(1)) == 8 and store.get_run(1).status == stores.FINISHED
    assert store.get_artifacts(1)[0].metadata == metadata

    assert cli.main(["run", out, "--repeat", "3"]) == 0
    assert "median" in capsys.readouterr().out


@pytest.mark.tvm
def test_runs_show_report_and_records(capsys, tuned_store, tmp_path):
    store, sessions, _ = tuned_store
    first, second = (str(s.run_id) for s in sessions)
    assert cli.main(["runs", "--store", store.url]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[:4] for line in listing[1:3]] == [[first, "tuned", "tiny-mlp", "round-robin"],
                                                           [second, "tuned", "tiny-mlp", "random"]]
    assert cli.main(["show", first, "--store", store.url]) == 0
    table = capsys.readouterr().out
    assert "20 trials" in table and "fused_matmul_add_relu" in table and "latency %" in table
    assert cli.main(["report", first, second, "-o", str(tmp_path / "r.html"), "--store", store.url]) == 0
    assert "data:image/png" in (tmp_path / "r.html").read_text()
    capsys.readouterr()
    measured = sum(bool(t.run_secs) for t in store.get_trials(int(first)))
    assert cli.main(["records", "export", first, str(tmp_path / "ms"), "--store", store.url]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {measured} records")
    fresh = f"sqlite:///{tmp_path}/fresh.db"
    assert cli.main(["records", "import", str(tmp_path / "ms"), "--store", fresh]) == 0
    assert capsys.readouterr().out.startswith(f"imported {measured} records")
    assert cli.main(["runs", "--store", fresh]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["1", "imported"]
    assert "no run 7" in _one_line_error(capsys, ["show", "7", "--store", store.url])
    assert "import of records" in _one_line_error(capsys, ["tune", "--resume", "1", "--store", fresh])


def test_streams_prints_a_plan(capsys):
    assert cli.main(["streams", "inception-cells"]) == 0
    out = capsys.readouterr().out
    assert "streams:" in out and "syncs:" in out
