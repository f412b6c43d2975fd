"""The command line: bad input is one line on stderr with exit code 2; the happy path end to end."""

import json
import os
import subprocess
import sys
import time

import pytest

from tunewise import cli, stores
from tunewise.delivery import timing
from tunewise.report import check_text, summarize


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
    (["tune", "tiny-mlp", "--timing-rounds", "0"], "bad --timing-rounds '0': expected a whole number of at least 1"),
    (["tune", "tiny-mlp", "--scheduler", "fastest"], "fastest"),
    (["tune", "tiny-mlp", "--target", "llvm -mcpu=znver3"], "option strings"),
    (["tune", "tiny-mlp", "--target", "{broken"], "not valid JSON"),
    (["tune", "tiny-mlp", "--target", '{"kind": "llvm", "num-cores": 4096}'],
     "the target asks for 4096 cores (num-cores), and this process may use "),
    (["tune", "tiny-mlp", "--graph-level", "max"], "graph level"),
    (["tune", "tiny-mlp", "--precision", "int4"], "unknown precision 'int4'; choose one of: float32, bfloat16"),
    (["tune", "tiny-mlp", "--precision", "bfloat16", "--target", '{"kind": "llvm", "mcpu": "haswell"}'],
     "precision bfloat16 needs a CPU with AMX tiles for bfloat16, and this target lacks amx-tile, amx-bf16"),
    (["tune", "tiny-mlp", "--precision", "float16"], "precision float16 is for GPU tensor cores"),
    (["tune", "--resume", "1", "--precision", "bfloat16"], "drop --precision"),
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
    (["tune", "tiny-mlp", "--goal", "-1ms"], "bad latency goal '-1ms'"),
    (["tune", "tiny-mlp", "--goal", "fast"], "bad latency goal 'fast'"),
    (["tune", "tiny-mlp", "--goal", "0.9x-tensorrt"], "bad latency goal"),
    (["tune", "tiny-mlp", "--energy-budget", "abc"], "bad energy budget 'abc'"),
    (["tune", "tiny-mlp", "--energy-budget", "-5kJ"], "bad energy budget '-5kJ'"),
    (["tune", "tiny-mlp", "--diminishing", "often"], "bad --diminishing 'often'"),
    (["tune", "tiny-mlp", "--check-every", "0s"], "bad model-check interval '0s'"),
    (["tune", "tiny-mlp", "--check-every", "sometimes"], "like 90s, 10m or 1h, or 'epoch' or 'never'"),
    (["tune", "tiny-mlp", "--energy-meter", "wattmeter"], "unknown energy meter 'wattmeter'"),
    (["tune", "--resume", "1", "--goal", "5ms"], "drop --goal"),
    (["tune", "--resume", "1", "--cache-flush"], "drop --cache-flush"),
    (["tune", "--resume", "1", "--no-pretrained"], "drop --no-pretrained"),
    (["tune-many", "tiny-mlp", "tiny-cnn"], "give each model a budget"),
    (["tune-many", "tiny-mlp", "--trials", "8", "--policy", "pbt"], "unknown population policy 'pbt'"),
    (["tune-many", "tiny-mlp", "--trials", "8", "--round", "0s"], "bad round length '0s'"),
    (["tune-many", "tiny-mlp", "--trials", "8", "--store", "sqlite://"], "not an in-memory SQLite store"),
    (["tune-many", "--resume", "1,2", "--trials", "8"], "--resume continues the fleet's runs with their own models and "
                                                        "settings; drop --trials"),
    (["tune-many", "tiny-mlp", "--resume", "1"], "drop tiny-mlp"),
    (["tune-many", "--resume", "1,x"], "bad RUNS 'x'"),
    (["runs", "--store", "foo://bar/baz"], "has the scheme foo:, which tunewise does not take: give sqlite:///PATH or "
                                          "postgresql+psycopg://"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, expected):
    assert expected in _one_line_error(capsys, argv)


def test_corrupt_onnx_is_one_line(capsys, tmp_path):
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(b"garbage")
    assert "not a valid ONNX model" in _one_line_error(capsys, ["tasks", str(path)])


def test_duration_parsing():
    assert cli.parse_duration("90") == 90 and cli.parse_duration("10m") == 600 and cli.parse_duration("1.5h") == 5400


def test_the_summary_says_which_checks_read_the_previous_checks_model():
    assert check_text(stores.ModelLatency(378.0, 400, 13.6e-3, 20.0, timed=13.6e-3)) == "13.600 ms at 378s"
    assert (check_text(stores.ModelLatency(545.0, 700, 12.8e-3, 20.0, timed=18.6e-3, to_previous=0.94))
            == "12.800 ms at 545s (itself 18.600 ms, in a slow stretch)")
    assert check_text(stores.ModelLatency(9.0, 4, float("inf"), 3.0, message="output 0 differs")) == (
        "failed at 9s (output 0 differs)")


def test_the_summary_says_when_the_machine_runs_slower_than_while_tuning():
    assert cli._slower_than_while_tuning(None) == ""
    as_fast = {"trials": 1446, "read_s": 11.9e-3, "timed_s": 12.5e-3, "timings": 2}
    assert cli._slower_than_while_tuning(as_fast) == ""
    assert cli._slower_than_while_tuning({"trials": 1446, "read_s": 11.9e-3, "timed_s": 15.8e-3, "timings": 1}) == (
        "the model checked after 1446 trials timed 15.800 ms here against 11.900 ms while tuning (1.33x): the "
        "machine runs slower now, and so do the models timed above")
    assert cli._slower_than_while_tuning({"trials": 1446, "read_s": 11.9e-3, "timed_s": 15.8e-3, "timings": 3}) == (
        "the model checked after 1446 trials timed 15.800 ms here against 11.900 ms while tuning (1.33x, the "
        "nearest of 3 timings): the machine runs slower now, and so do the models timed above")


def test_no_traceback_from_a_real_process(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tunewise.cli", "tune", str(tmp_path / "x.onnx")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.tvm
def test_tasks_tune_and_run_end_to_end(capsys, cli_run):
    assert cli.main(["tasks", "tiny-mlp"]) == 0
    listing = capsys.readouterr().out
    assert "fused_matmul" in listing and "2 tasks" in listing

    url, out, summary = cli_run
    assert "match the reference" in summary and "PyTorch eager" in summary and "run 1" in summary
    assert "onnxruntime " in summary and f"timed as         {timing.describe()}" in summary
    metadata = json.load(open(os.path.join(out, "metadata.json")))
    assert metadata["trials"] == 4 and metadata["model"] == "tiny-mlp" and metadata["run"] == 1
    assert metadata["inputs"] == [{"name": "x", "shape": [1, 64], "dtype": "float32"}]
    assert metadata["timing"] == timing.describe() and metadata["onnxruntime_latency_s"] > 0
    # the summary compares in the rounds the references took turns with the tuned model
    ratio = metadata["ratios"]["onnxruntime"]
    assert set(metadata["ratios"]) == set(timing.cpu_references()) and ratio > 0
    assert f"(tuned TVM is {timing.relation(ratio, 1.0)})" in summary.split("onnxruntime ")[1].splitlines()[0]
    # the untuned model is not compiled: its latency is the estimate from its tasks' default latencies
    assert metadata["untuned_latency_s"] is None
    [untuned] = [line for line in summary.splitlines() if line.startswith("untuned TVM")]
    assert untuned.endswith(" ms estimated from its tasks' default latencies (--time-untuned times it)")
    assert untuned.split()[2] == f"{summarize(stores.create(url), 1).untuned * 1e3:.3f}"
    store = stores.create(url)
    assert len(store.get_trials(1)) == 4 and store.get_run(1).status == stores.FINISHED
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
    assert "class='tunewise-figure'" in (tmp_path / "r.html").read_text()
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


@pytest.mark.tvm
def test_tasks_lists_transposed_convolutions_and_resizes(capsys, transposed_model):
    path, operators = transposed_model
    assert cli.main(["tasks", path, "--no-measure", "--no-groups"]) == 0
    listing = capsys.readouterr().out
    assert all(operator in listing for operator in operators), listing


@pytest.mark.tvm
@pytest.mark.timing
def test_an_operator_no_level_compiles_stops_tune_in_seconds(capsys, tmp_path, monkeypatch, uncompilable_model):
    from tunewise.importing import frontend

    monkeypatch.setattr(frontend, "load", lambda *args, **kwargs: uncompilable_model)
    url, out = f"sqlite:///{tmp_path}/tunewise.db", tmp_path / "artifact"
    start = time.perf_counter()
    code = cli.main(["tune", "tiny-mlp", "--time-budget", "3m", "--no-references", "--store", url, "-o", str(out)])
    assert time.perf_counter() - start < 60  # not the budget: before the first slot
    *progress, error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and error == ("tunewise: error: cannot compile the model at any graph level: TVM cannot lower "
                                   "operator relax.ewise_fma for this target (function main)")
    assert [line.split(maxsplit=2)[-1] for line in progress] == ["importing the model", "extracting tasks"]
    assert stores.create(url).get_runs() == [] and not out.exists()  # no run was started, nothing tuned


@pytest.mark.tvm
@pytest.mark.timing
def test_a_model_tvm_computes_otherwise_stops_tune_at_its_first_check(capsys, tmp_path, monkeypatch,
                                                                      mistranslated_model):
    from tunewise.importing import frontend

    monkeypatch.setattr(frontend, "load", lambda *args, **kwargs: mistranslated_model)
    url, out = f"sqlite:///{tmp_path}/tunewise.db", tmp_path / "artifact"
    start = time.perf_counter()
    code = cli.main(["tune", "tiny-mlp", "--time-budget", "3m", "--check-every", "5s", "--no-references",
                     "--store", url, "-o", str(out)])
    assert time.perf_counter() - start < 90  # not the budget: at the first check
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and error.startswith("tunewise: error: the model TVM compiles differs from the original "
                                          "before any tuning")
    store = stores.create(url)
    (run,) = store.get_runs()
    assert store.get_trials(run.id, records=False) and not out.exists()  # what was measured is kept, nothing saved


def test_streams_prints_a_plan(capsys):
    assert cli.main(["streams", "inception-cells"]) == 0
    out = capsys.readouterr().out
    assert "streams:" in out and "syncs:" in out


def _broken_store(kind: str, path) -> bytes:
    """A store file that cannot be used: ``random`` bytes, a real store ``truncated`` to half, or ``empty``."""
    if kind == "random":
        path.write_bytes(bytes(range(256)) * 16)
    elif kind == "truncated":
        store = stores.create(f"sqlite:///{path}")
        store.create_run("tiny-mlp", "cpu", "random", {"padding": "x" * 100_000})
        store.close()
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    else:
        path.write_bytes(b"")
    return path.read_bytes()


@pytest.mark.parametrize("kind", ["random", "truncated", "empty"])
@pytest.mark.parametrize("command", [["runs"], ["show", "1"], ["report", "1", "-o", "{tmp}/report.html"],
                                     ["records", "export", "1", "{tmp}/records"]], ids=lambda c: c[0])
def test_a_read_only_command_on_a_broken_store_is_one_line_and_writes_nothing(capsys, tmp_path, kind, command):
    path = tmp_path / "tunewise.db"
    content = _broken_store(kind, path)
    argv = [part.format(tmp=tmp_path) for part in command] + ["--store", f"sqlite:///{path}"]
    assert "tunewise.db" in _one_line_error(capsys, argv)
    assert path.read_bytes() == content


@pytest.mark.parametrize("kind", ["random", "truncated"])
@pytest.mark.parametrize("command", [["tune", "--resume", "1"], ["records", "import", "{tmp}"]], ids=lambda c: c[1])
def test_a_writing_command_on_a_broken_store_is_one_line(capsys, tmp_path, kind, command):
    path = tmp_path / "tunewise.db"
    _broken_store(kind, path)
    argv = [part.format(tmp=tmp_path) for part in command] + ["--store", f"sqlite:///{path}"]
    assert "tunewise.db" in _one_line_error(capsys, argv)


def _tunewise(*args, cwd=None, timeout=300):
    """Run the CLI in a process of its own; returns it with ``stdout`` and ``stderr`` as text."""
    return subprocess.run([sys.executable, "-m", "tunewise.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, "COLUMNS": "200"})  # unwrapped lines


@pytest.mark.tvm
def test_store_password_is_never_printed(password_postgres, tmp_path, capfd, monkeypatch):
    url, password = password_postgres
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")  # unwrapped lines
    printed = []

    def tunewise(*argv) -> tuple[int, str]:
        code = cli.main(list(argv))
        out, err = capfd.readouterr()  # what reaches the terminal, from Python or from native code
        printed.append(out + err)
        return code, err

    code, err = tunewise("tune", "--no-references", "--timing-rounds", "3",
                         "tiny-mlp", "--trials", "4", "--trials-per-slot", "2", "--store",
                         url, "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert "tuning as run 1 of postgresql+psycopg://tuner:***@127.0.0.1" in err
    wrong = url.replace(password, "Wr0ng-Pa55word")
    for argv, expected in ((["runs", "--store", wrong], "password authentication failed"),
                           (["show", "99", "--store", url], "no run 99")):
        code, err = tunewise(*argv)
        assert code == 2 and expected in err and err.count("\n") == 1, err
    for text in printed:
        assert password not in text and "Wr0ng-Pa55word" not in text


@pytest.fixture(scope="module")
def tiny_artifact(tiny_mlp, tmp_path_factory):
    """A real artifact of tiny-mlp, saved by CompiledModel.save."""
    from tunewise.delivery import compile as compiler

    compiled = compiler.CompiledModel(compiler.build(tiny_mlp), tiny_mlp.target, {"model": "tiny-mlp", "run": 3})
    compiled.metadata.update(compiler.io_metadata(tiny_mlp.inputs, tiny_mlp.reference_outputs))
    return compiled.save(str(tmp_path_factory.mktemp("artifact") / "tiny-mlp"))


def _damaged(artifact, tmp_path, name, damage):
    import shutil

    folder = shutil.copytree(artifact, tmp_path / "damaged")
    path = folder / name
    path.write_bytes(damage(path.read_bytes()))
    return str(folder)


@pytest.mark.tvm
@pytest.mark.parametrize("damage,expected", [
    (lambda b: b[:len(b) // 2], "model.so is damaged"),
    (lambda b: b"", "model.so is damaged"),
    (lambda b: bytes(__import__("numpy").random.default_rng(0).integers(0, 256, len(b), dtype="uint8")),
     "model.so is damaged"),
], ids=["truncated", "empty", "random"])
def test_run_refuses_a_damaged_library_in_one_line(tiny_artifact, tmp_path, damage, expected):
    proc = _tunewise("run", _damaged(tiny_artifact, tmp_path, "model.so", damage), "--repeat", "1")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and expected in proc.stderr, proc.stderr


def _edited(**changes):
    """A damage that sets keys of the real metadata.json, its model.so checksum kept."""
    return lambda text: json.dumps({**json.loads(text), **changes}).encode()


@pytest.mark.tvm
@pytest.mark.parametrize("damage,expected", [
    (lambda _: bytes(range(256)) * 4, "not JSON text"),
    (lambda _: b"[1,2,3]", "a JSON list, not an object"),
    (lambda _: b"{}", "names no target"),
    (_edited(target={"kind": "no-such-kind"}), "names a bad target"),
    (_edited(inputs=[{"shape": "x"}]), "has no shape"),
    (_edited(inputs=[{"shape": [1, 64], "dtype": "float99"}]), "has no valid dtype"),
    (_edited(inputs=[{"shape": [1, 64]}]), "has no valid dtype"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "model_sha256"}).encode(),
     "not a tunewise artifact of this version (metadata.json has no checksum of model.so): rebuild it with "
     "tunewise tune --resume 3 -o"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "inputs"}).encode(),
     "metadata.json describes no inputs for tunewise run to make"),
], ids=["random", "list", "empty-object", "bad-target", "bad-shape", "bad-dtype", "no-dtype", "no-checksum",
        "no-inputs"])
def test_run_refuses_damaged_metadata_in_one_line(capsys, tiny_artifact, tmp_path, damage, expected):
    assert expected in _one_line_error(capsys, ["run", _damaged(tiny_artifact, tmp_path, "metadata.json", damage)])


@pytest.mark.tvm
def test_run_loads_an_intact_artifact(capsys, tiny_artifact):
    assert cli.main(["run", tiny_artifact, "--repeat", "1"]) == 0
    assert "tiny-mlp: median" in capsys.readouterr().out


@pytest.mark.tvm
@pytest.mark.parametrize("output", ["/proc/x", "file", "file/below"])
def test_a_bad_output_is_refused_before_tuning(capsys, tmp_path, output):
    (tmp_path / "file").write_text("taken\n")
    url = f"sqlite:///{tmp_path}/tunewise.db"
    message = _one_line_error(capsys, ["tune", "tiny-mlp", "--trials", "2", "--trials-per-slot", "2", "--store", url,
                                       "-o", os.path.join(tmp_path, output)])
    assert "cannot write the artifact folder" in message
    assert not os.path.exists(tmp_path / "tunewise.db")  # refused before the store was opened


@pytest.mark.tvm
def test_resume_writes_the_artifact_to_a_new_output(capsys, tmp_path, cli_run):
    import shutil

    shutil.copy(cli_run[0].removeprefix("sqlite:///"), tmp_path / "tunewise.db")  # the shared run stays as it is
    url, first = f"sqlite:///{tmp_path}/tunewise.db", cli_run[1]
    assert "cannot write the artifact folder" in _one_line_error(capsys, ["tune", "--resume", "1", "-o", "/proc/x",
                                                                          "--store", url])
    out = str(tmp_path / "again")
    assert cli.main(["tune", "--no-references", "--timing-rounds", "3", "--time-untuned",
                     "--resume", "1", "-o", out, "--store", url]) == 0
    summary = capsys.readouterr().out
    assert f"\nartifact         {out}\n" in summary
    assert "tuned TVM" in summary and "PyTorch eager" not in summary and "onnxruntime" not in summary
    with open(os.path.join(out, "metadata.json")) as f:
        metadata = json.load(f)
    assert metadata["torch_eager_latency_s"] is None and metadata["onnxruntime_latency_s"] is None
    # --time-untuned: the untuned model compiled and timed in turn with the tuned one
    assert metadata["untuned_latency_s"] > 0 and metadata["latency_s"] > 0
    assert metadata["timing"] == timing.describe(3, references=False, models=("untuned", "tuned"))
    assert f"untuned TVM      {metadata['untuned_latency_s'] * 1e3:.3f} ms\n" in summary
    store = stores.create(url)
    assert store.get_run(1).settings["output"] == out
    assert [a.path for a in store.get_artifacts(1)] == [first, out]
    assert cli.main(["run", out, "--repeat", "1"]) == 0


@pytest.mark.tvm
@pytest.mark.parametrize("argv,expected", [
    (["report", "1", "-o", "/proc/x.html"], "cannot write the report /proc/x.html"),
    (["report", "1", "-o", "{tmp}/file/r.html"], "is a file, not a folder"),
    (["records", "export", "1", "/proc/x"], "cannot write the records folder /proc/x"),
    (["records", "export", "1", "{tmp}/file/records"], "is a file, not a folder"),
])
def test_a_bad_report_or_export_destination_is_one_line(capsys, tmp_path, cli_run, argv, expected):
    (tmp_path / "file").write_text("taken\n")
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv] + ["--store", cli_run[0]]
    assert expected in _one_line_error(capsys, argv)


@pytest.mark.tvm
def test_records_import_is_idempotent(capsys, tmp_path, cli_run):
    folder, fresh = str(tmp_path / "records"), f"sqlite:///{tmp_path}/fresh.db"
    assert cli.main(["records", "export", "1", folder, "--store", cli_run[0]]) == 0
    assert cli.main(["records", "import", folder, "--store", fresh]) == 0
    assert "as run 1" in capsys.readouterr().out
    assert cli.main(["records", "import", folder, "--store", fresh]) == 0
    assert capsys.readouterr().out.startswith("nothing to import: every record in")
    assert [r.id for r in stores.create(fresh).get_runs()] == [1]
    empty = tmp_path / "empty"
    empty.mkdir()
    for name in ("database_workload.json", "database_tuning_record.json"):
        (empty / name).write_text("")
    assert "holds no tuning records" in _one_line_error(capsys, ["records", "import", str(empty), "--store", fresh])


def _onnx_matmul(path, x_dims):
    """An ONNX MatMul + Relu of an input ``x`` of dims ``x_dims`` (ints or names) by an 8x4 weight."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4], np.arange(32, dtype=np.float32).tolist())
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [x_dims[0], 4])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), path)
    return path


@pytest.mark.parametrize("x_dims,shape,expected", [
    (["N", 8], "3,8,1", "ONNX input 'x' has shape ['N', 8]; --input-shape x=... can set only its dynamic"),
    (["N", 8], "3,9", "ONNX input 'x' has shape ['N', 8]; --input-shape x=... can set only its dynamic"),
    (["N", "K"], "3,9", "onnxruntime cannot run"),
])
def test_an_input_shape_the_onnx_model_cannot_take_is_one_line(capsys, tmp_path, x_dims, shape, expected):
    path = _onnx_matmul(str(tmp_path / "mm.onnx"), x_dims)
    assert expected in _one_line_error(capsys, ["tasks", path, "--no-measure", "--input-shape", f"x={shape}"])


@pytest.mark.tvm
def test_a_target_this_machine_cannot_run_is_refused_before_tuning(capsys, tmp_path):
    import tvm
    from tvm.target import codegen

    from tunewise import target

    url = f"sqlite:///{tmp_path}/tunewise.db"
    cases = []
    if not tvm.cuda(0).exist:
        cases.append(("cuda", "target cuda needs an NVIDIA GPU, and this machine has none"))
    if "amx-tile" not in codegen.llvm_get_cpu_features(tvm.target.Target(target.host_cpu())):
        cases.append(('{"kind": "llvm", "mcpu": "sapphirerapids"}', "cannot run code for mcpu sapphirerapids"))
    if not codegen.llvm_get_system_triple().startswith("aarch64"):
        cases.append(('{"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72"}',
                      "machine cannot run code for aarch64-linux-gnu"))
    if not cases:
        pytest.skip("this machine has CUDA and AMX")
    for spec, expected in cases:
        assert expected in _one_line_error(capsys, ["tune", "tiny-mlp", "--trials", "2", "--target", spec,
                                                    "--store", url, "-o", str(tmp_path / "out")])
    assert not os.path.exists(tmp_path / "tunewise.db")  # no run was made


@pytest.mark.parametrize("argv,expected", [
    (["tune", "tiny-mlp", "--time-budget", "-1m"], "bad time budget '-1m'"),
    (["tune", "tiny-mlp", "--time-budget", "-.5h"], "bad time budget '-.5h'"),
])
def test_negative_values_are_named_as_bad_values(capsys, argv, expected):
    assert expected in _one_line_error(capsys, argv)


def test_a_file_named_pt2_that_is_no_exported_program_is_one_line(capsys, tmp_path):
    import zipfile

    (tmp_path / "text.pt2").write_text("not an exported program\n")
    with zipfile.ZipFile(tmp_path / "zip.pt2", "w") as archive:
        archive.writestr("notes.txt", "a zip file, but no exported program\n")
    for name, expected in (("text.pt2", "not a torch.export.save archive"), ("zip.pt2", "not in a subdirectory")):
        message = _one_line_error(capsys, ["tasks", str(tmp_path / name), "--no-measure"])
        assert "cannot read exported program" in message and expected in message


def test_the_zoo_is_listed_where_tune_help_says(capsys):
    from tunewise import zoo

    with pytest.raises(SystemExit) as exit_:
        cli.main(["tune", "--help"])
    assert exit_.value.code == 0
    assert "`tunewise tasks --list` lists them" in capsys.readouterr().out
    assert cli.main(["tasks", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == zoo.names()


def test_every_tasks_and_streams_option_has_help():
    import argparse

    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("tasks", "streams"):
        assert all(action.help for action in sub.choices[command]._actions), command


def test_streams_plans_an_exported_program_file(capsys, tmp_path):
    import torch

    from tunewise import runtime
    from tunewise.zoo import architectures

    model, inputs = architectures.InceptionCells(channels=16, cells=1).eval(), (torch.randn(1, 3, 16, 16),)
    path = str(tmp_path / "cells.pt2")  # a cell's four branches: a plan of several streams
    torch.export.save(torch.export.export(model, inputs), path)
    assert cli.main(["streams", path]) == 0
    assert capsys.readouterr().out.strip() == runtime.plan_model(model, inputs).describe().strip()
    (tmp_path / "m.onnx").write_bytes(b"")
    assert "zoo name or a .pt2 file" in _one_line_error(capsys, ["streams", str(tmp_path / "m.onnx")])


@pytest.mark.tvm
def test_tune_parses_its_latency_goal_once(tmp_path, monkeypatch):
    from tunewise.goals import Goal

    parse, parsed = Goal.parse.__func__, []

    def counted(cls, text):
        parsed.append(text)
        return parse(cls, text)

    monkeypatch.setattr(Goal, "parse", classmethod(counted))
    assert cli.main(["tune", "tiny-mlp", "--goal", "10s", "--trials", "2", "--trials-per-slot", "2",
                     "--no-references", "--timing-rounds", "1", "-o", str(tmp_path / "out"),
                     "--store", f"sqlite:///{tmp_path}/tunewise.db"]) == 0
    assert parsed == ["10s"]
