"""The RPC runner against a real TVM RPC tracker and server on loopback: a tiny task measured on the device
the tracker hands out, and an unreachable tracker, an unknown key or a malformed address in one line."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tunewise import candidate_runners, evaluators
from tunewise.errors import InputError
from tunewise.lowering import tasks
from tunewise.settings import RunSettings
from tunewise.tuning import measure
from tunewise.tuning.build import build_candidate, export_candidate

KEY = "tunewise-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    """``(host, port)`` of a TVM RPC tracker on loopback with one CPU server registered under :data:`KEY`; both
    without PyTorch, as on a device that has none (TVM's FFI imports it whenever it can: 4 s of the start of
    each of their processes)."""
    from tvm import rpc

    no_torch = tmp_path_factory.mktemp("no-torch")
    (no_torch / "torch").mkdir()
    (no_torch / "torch" / "__init__.py").write_text("raise ImportError('PyTorch is not on this device')\n")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(no_torch), *sys.path])}
    port = free_port()
    started = [subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port",
                                 str(port), "--port-end", str(port + 1)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=environment, start_new_session=True)]
    try:
        deadline = time.monotonic() + 120
        while True:  # TVM's client would wait seconds between its attempts to connect
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:  # not listening yet
                assert time.monotonic() < deadline, "the RPC tracker did not start"
                time.sleep(0.1)
        server = free_port()
        started.append(subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--host", "127.0.0.1",
                                         "--port", str(server), "--port-end", str(server + 1), "--tracker",
                                         f"127.0.0.1:{port}", "--key", KEY],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment,
                                        start_new_session=True))
        while KEY not in str(rpc.connect_tracker("127.0.0.1", port).summary().get("queue_info", {})):
            assert time.monotonic() < deadline, "the RPC server did not register"
            time.sleep(0.2)
        yield "127.0.0.1", port
    finally:
        for process in reversed(started):  # each with the processes it started (the server's worker)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.tvm
def test_a_tiny_task_is_measured_on_the_device_the_tracker_hands_out(tracker, tiny_mlp, host_target):
    host, port = tracker
    mod = tiny_mlp.task_mods[0]
    artifact = export_candidate(build_candidate(mod, host_target))
    runner = candidate_runners.create(f"rpc://{host}:{port}/{KEY}", target=host_target,
                                      config=measure.MeasureConfig(number=2, min_repeat_ms=10))
    try:
        timed = runner.run(artifact, tasks.args_info(mod), evaluators.create("fixed"))
        adaptive = runner.run(artifact, tasks.args_info(mod), evaluators.create("adaptive"))
    finally:
        runner.close()
    assert timed.error_msg is None and adaptive.error_msg is None, (timed.error_msg, adaptive.error_msg)
    assert 0 < float(timed.run_secs[0]) < 1 and all(0 < float(x) < 1 for x in adaptive.run_secs)


@pytest.mark.tvm
def test_an_unreachable_tracker_or_an_unknown_key_is_one_line(tracker, host_target):
    host, port = tracker
    config = measure.MeasureConfig()
    for spec, message in ((f"rpc://127.0.0.1:{free_port()}/{KEY}", "cannot reach the RPC tracker"),
                          (f"rpc://{host}:{port}/gpu", f"knows no device with key 'gpu' (keys: {KEY})")):
        with pytest.raises(InputError, match=re.escape(message)) as err:
            candidate_runners.create(spec, target=host_target, config=config)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("spec", ["rpc://", "rpc://host/key", "rpc://host:port/key", "rpc://h:1/k/extra"])
def test_a_malformed_rpc_address_is_one_line(spec):
    with pytest.raises(InputError, match="expected rpc://TRACKER_HOST:PORT/DEVICE_KEY"):
        RunSettings(runner=spec)
    assert RunSettings(runner="rpc://tracker.local:9190/rasp4").runner == "rpc://tracker.local:9190/rasp4"
