"""The command line: bad input is one line on stderr with exit code 2; the happy path end to end."""

import json
import os
import subprocess
import sys

import pytest

from tunewise import cli


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
    (["run", "/nonexistent/artifact"], "not a tunewise artifact"),
    (["frobnicate"], "invalid choice"),
    (["tune"], "required"),
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

    out = str(tmp_path / "artifact")
    assert cli.main(["tune", "tiny-mlp", "--trials", "8", "--trials-per-slot", "4", "-o", out]) == 0
    summary = capsys.readouterr().out
    assert "match the reference" in summary and "PyTorch eager" in summary
    metadata = json.load(open(os.path.join(out, "metadata.json")))
    assert metadata["trials"] == 8 and metadata["model"] == "tiny-mlp"
    assert metadata["inputs"] == [{"shape": [1, 64], "dtype": "float32"}]
    trials = open(os.path.join(out, "records", "trials.jsonl")).read().splitlines()
    assert len(trials) == 8

    assert cli.main(["run", out, "--repeat", "3"]) == 0
    assert "median" in capsys.readouterr().out
