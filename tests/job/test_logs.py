"""Third-party output (TVM's C++ log lines, PyTorch's warnings, TVM's Python loggers) goes to a log file, not
the terminal, unless verbose."""

import logging
import os
import re
import warnings

import pytest

import tunewise
from tunewise import cli
from tunewise.importing import frontend, import_cache
from tunewise.job import logs

_THIRD_PARTY = ("Scope Saving:", "Scope Loaded:", "executable.cc", "FutureWarning")
_LOG_LINE = re.compile(r"^tunewise: third-party log: (.+)$", re.MULTILINE)


@pytest.fixture
def log_dir(tmp_path, monkeypatch):
    folder = tmp_path / "logs"
    monkeypatch.setenv(logs.LOG_DIR_VARIABLE, str(folder))
    monkeypatch.delenv("TUNEWISE_DEBUG", raising=False)
    return folder


@pytest.fixture
def fresh_imports(monkeypatch):
    """Models imported afresh, not read from the import cache: their importers print and warn."""
    monkeypatch.setenv(import_cache.CACHE_DIR_VARIABLE, "")


def _quiet(captured) -> str:
    """The third-party log named in ``captured``'s standard error (which names it once), checked to be the only
    place third-party lines went."""
    terminal = captured.out + captured.err
    for line in _THIRD_PARTY:
        assert line not in terminal, terminal
    paths = _LOG_LINE.findall(captured.err)
    assert len(paths) == 1, captured.err
    return open(paths[0]).read()


@pytest.mark.filterwarnings("default::FutureWarning")  # the project's pytest settings ignore them
def test_python_logs_warnings_and_native_writes_go_to_the_log(capfd, log_dir):
    with logs.routed("test"):
        logging.getLogger("tvm.s_tir.meta_schedule").warning("search log line")
        warnings.warn("a FutureWarning from elsewhere", FutureWarning, stacklevel=1)
        os.write(2, b"native stderr line\n")
        os.write(1, b"native stdout line\n")
        print("tunewise's own line")
    captured = capfd.readouterr()
    assert "tunewise's own line" in captured.out
    log = _quiet(captured)
    for line in ("search log line", "a FutureWarning from elsewhere", "native stderr line", "native stdout line"):
        assert line in log and line not in captured.out + captured.err
    os.write(2, b"after\n")  # the descriptors are back
    assert capfd.readouterr().err == "after\n"


def test_nothing_written_leaves_no_log(capfd, log_dir):
    with logs.routed("test"):
        print("only ours")
    assert capfd.readouterr().err == "" and not log_dir.exists()


@pytest.mark.tvm
def test_what_the_onnx_importer_prints_goes_to_the_log(capfd, log_dir, causal_onnx, fresh_imports):
    path = str(causal_onnx)
    capfd.readouterr()
    with logs.routed("test"):
        frontend.load(path)  # TVM's importer refuses the pads and prints so; the pads folded, it imports
    captured = capfd.readouterr()
    assert "Error converting operator Pad" in _quiet(captured)
    assert "Error converting" not in captured.out + captured.err

    with logs.routed("test", verbose=True):
        frontend.load(path)
    assert "Error converting operator Pad" in capfd.readouterr().out


@pytest.mark.tvm
@pytest.mark.filterwarnings("default::FutureWarning")
def test_tune_and_run_keep_third_party_output_in_the_log(capfd, log_dir, tmp_path, fresh_imports):
    out, url = str(tmp_path / "artifact"), f"sqlite:///{tmp_path}/tunewise.db"
    assert cli.main(["tune", "--no-references", "--timing-rounds", "3",
                     "tiny-mlp", "--trials", "4", "--trials-per-slot", "4", "-o", out,
                     "--store", url]) == 0
    captured = capfd.readouterr()
    assert "match the reference" in captured.out
    log = _quiet(captured)
    assert "Scope Saving:" in log and "FutureWarning" in log and "LeafSpec" in log

    assert cli.main(["run", out, "--repeat", "1"]) == 0
    captured = capfd.readouterr()
    assert "median" in captured.out and "Scope Loaded:" in _quiet(captured)

    assert cli.main(["--verbose", "run", out, "--repeat", "1"]) == 0
    captured = capfd.readouterr()
    assert "Scope Loaded:" in captured.err and not _LOG_LINE.search(captured.err)
    assert cli.main(["run", out, "--verbose", "--repeat", "1"]) == 0
    assert "Scope Loaded:" in capfd.readouterr().err

    tunewise.load(out)  # the Python API is quiet too, unless asked
    assert "Scope Loaded:" in _quiet(capfd.readouterr())
    tunewise.set_verbose(True)
    try:
        tunewise.load(out)
    finally:
        tunewise.set_verbose(None)
    captured = capfd.readouterr()
    assert "Scope Loaded:" in captured.err and not _LOG_LINE.search(captured.err)
