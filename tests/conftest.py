"""Shared fixtures: real TVM on tiny models, built once per test session; real tuning processes."""

import ast
import functools
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest


@pytest.fixture(scope="session", autouse=True)
def _tunewise_folders(tmp_path_factory):
    """Third-party logs of the tests' tunewise calls and processes go to a temporary folder, not the checkout;
    imported models are cached in one folder of this test session (its pytest-xdist workers together; the
    folder ``$TUNEWISE_CACHE_DIR`` names when set), not the user's."""
    from tunewise.importing import import_cache
    from tunewise.job import logs

    os.environ[logs.LOG_DIR_VARIABLE] = str(tmp_path_factory.mktemp("tunewise-logs"))
    if os.environ.get(import_cache.CACHE_DIR_VARIABLE):  # given by scripts/test to both of its passes
        return
    session_folder = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        session_folder = session_folder.parent  # the workers' folders are in the session's
    os.environ[import_cache.CACHE_DIR_VARIABLE] = str(session_folder / "tunewise-cache")


@pytest.fixture
def causal_onnx(tmp_path):
    """A dilated causal 1-D convolution exported to ONNX (``causal.onnx``): the exporter writes its left pad as
    pads computed from constants, which TVM's ONNX importer refuses."""
    import torch

    class CausalConv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(4, 4, 3, dilation=2)

        def forward(self, x):
            return self.conv(torch.nn.functional.pad(x, (4, 0)))

    path = tmp_path / "causal.onnx"
    torch.onnx.export(CausalConv().eval(), (torch.randn(1, 4, 32),), str(path), dynamo=False)
    return path


@pytest.fixture(scope="session")
def host_target():
    from tunewise import target
    from tunewise.tuning import tvm_env

    tvm_env.prepare("llvm")
    return target.resolve(None)


def pytest_collection_modifyitems(config, items):
    """The files sharing a tuned run first, then the other test files with tests marked ``tvm`` (the slow ones),
    each file's tests in their order, so that the quick files even out the workers' loads at the end; tests marked
    ``gpu`` are skipped on a machine without an NVIDIA GPU (TVM's device 0)."""
    slow_files = {item.path for item in items if item.get_closest_marker("tvm")}
    # the files sharing a tuned run are one unit of work, the longest: it starts first, then the other slow files
    items.sort(key=lambda item: (not _takes_a_shared_run(str(item.path)), item.path not in slow_files))
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_tests:
        return
    import tvm

    if not tvm.cuda(0).exist:
        for item in gpu_tests:
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU"))


SHARED_RUNS = ("tuned_store", "cli_run")
"""The session fixtures that tune: under ``--dist loadfile`` the files whose tests take one of them run on one
pytest-xdist worker, which tunes each once (:func:`pytest_xdist_make_scheduler`)."""


@functools.cache
def _takes_a_shared_run(path: str) -> bool:
    """Whether a function of the test file ``path`` takes a fixture of :data:`SHARED_RUNS` as an argument."""
    with open(path) as f:
        tree = ast.parse(f.read())
    return any(arg.arg in SHARED_RUNS for node in ast.walk(tree)
               if isinstance(node, ast.FunctionDef) for arg in node.args.args)


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the files that take a shared run (:data:`SHARED_RUNS`) as one unit of work."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesSharingRuns(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "tests sharing a tuned run" if _takes_a_shared_run(os.path.join(config.rootpath, path)) else path

    return FilesSharingRuns(config, log)


# a GPU as tunewise.target.cuda_description describes it (an H100 SXM's published figures)
_H100 = {"name": "NVIDIA H100 80GB HBM3", "compute_version": "9.0", "max_threads_per_block": 1024,
         "max_shared_memory_per_block": 49152, "warp_size": 32, "multi_processor_count": 132,
         "l2_cache_size_bytes": 52428800, "total_global_memory": 85_045_510_144}


@pytest.fixture
def gpu_description():
    """A GPU's description, for what can be built for a GPU on a machine without one."""
    return dict(_H100)


@pytest.fixture(scope="session")
def gpu_target():
    """A complete cuda target for the GPU of ``gpu_description`` (GPU 0 where there is one), with this CPU as
    its host; the CUDA compiler set up."""
    from tunewise import target
    from tunewise.tuning import tvm_env

    tvm_env.prepare("cuda")
    return target.resolve(target.cuda_config(target.cuda_description() or _H100))


@pytest.fixture(scope="session")
def measurer(host_target):
    from tunewise.tuning import measure

    # the fixed evaluator with short repeats: quick, and one sample per candidate (the adaptive default is
    # tested in evaluators/ and test_adatune, and end to end through the CLI)
    m = measure.Measurer(host_target, measure.MeasureConfig(number=2, min_repeat_ms=10), evaluator="fixed")
    yield m
    m.close()


@pytest.fixture(scope="session")
def tiny_mlp(host_target, measurer):
    """tiny-mlp extracted with default latencies measured: two dense tasks."""
    from tunewise.importing import frontend
    from tunewise.lowering import tasks

    return tasks.extract(frontend.load("tiny-mlp"), host_target, measurer=measurer)



@pytest.fixture(scope="session")
def cli_run(tmp_path_factory):
    """``(store URL, artifact folder, summary printed)`` of run 1: tiny-mlp tuned for 4 trials (2 a slot)
    through the CLI, its references timed. Shared: tests read it, and resume only a copy of its store."""
    import contextlib
    import io

    from tunewise import cli

    folder = tmp_path_factory.mktemp("cli-run")
    url, out, printed = f"sqlite:///{folder}/tunewise.db", str(folder / "artifact"), io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(["tune", "tiny-mlp", "--trials", "4", "--trials-per-slot", "2", "-o", out,
                         "--store", url]) == 0
    return url, out, printed.getvalue()


def _transposed_models() -> dict:
    """name: (module, input shape, operators its tasks must include at the default graph level), seeded."""
    import torch

    class UNet(torch.nn.Module):
        """A small U-Net: strided convolutions down, a transposed convolution and a bilinear resize up, skip
        connections joined by ``torch.cat``."""

        def __init__(self):
            super().__init__()
            self.encode = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.down = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.middle, self.up = torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.decode, self.head = torch.nn.Conv2d(16, 8, 3, padding=1), torch.nn.Conv2d(16, 2, 1)

        def forward(self, x):
            skip = torch.relu(self.encode(x))
            middle = torch.relu(self.middle(torch.relu(self.down(skip))))
            decoded = torch.relu(self.decode(torch.cat([torch.relu(self.up(middle)), skip], dim=1)))
            resized = torch.nn.functional.interpolate(middle, scale_factor=2, mode="bilinear", align_corners=False)
            return self.head(torch.cat([decoded, resized[:, :8]], dim=1))

    class Transposed1d(torch.nn.Module):
        """A 2-d convolution over one row, then 1-d ones: a strided one down and a transposed one back up,
        joined to the row by ``torch.cat``."""

        def __init__(self):
            super().__init__()
            self.row = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.down = torch.nn.Conv1d(8, 8, 3, stride=2, padding=1)
            self.up = torch.nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1)

        def forward(self, x):
            row = torch.relu(self.row(x)).squeeze(2)
            return torch.cat([self.up(torch.relu(self.down(row))), row], dim=1)

    with torch.random.fork_rng():
        torch.manual_seed(0)
        return {"unet-2d": (UNet().eval(), torch.randn(1, 3, 32, 32), ("conv2d_transpose", "resize2d")),
                "transposed-1d": (Transposed1d().eval(), torch.randn(1, 3, 1, 16), ("conv1d_transpose",))}


@pytest.fixture(scope="session", params=["unet-2d", "transposed-1d"])
def transposed_model(request, tmp_path_factory):
    """``(path, operators)``: a ``.pt2`` file of a small model with transposed convolutions (a U-Net with a
    bilinear resize too, or a 1-d one), and the operators its tasks must include at the default level."""
    import torch

    model, x, operators = _transposed_models()[request.param]
    path = str(tmp_path_factory.mktemp("transposed") / f"{request.param}.pt2")
    torch.export.save(torch.export.export(model, (x,)), path)
    return path, operators


@pytest.fixture(scope="session")
def uncompilable_model():
    """An imported model whose ``relax.ewise_fma`` (a fused multiply-add that Relax has no lowering for) no
    graph level can compile."""
    import numpy as np
    from tvm import relax

    from tunewise.importing import frontend

    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 8), "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            y = builder.emit(relax.op.nn.relu(x))
            out = builder.emit_output(relax.op.add(builder.emit(relax.op.ewise_fma(y, y, x)), x))
        builder.emit_func_output(out)
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    return frontend.ImportedModel("fma", builder.get(), (x,), (np.maximum(x, 0) ** 2 + 2 * x,))


@pytest.fixture
def logged():
    """``logged(name)``: a list that the messages logged on the logger ``name`` are appended to, to the end of
    the test."""
    attached = []

    def attach(name: str) -> list[str]:
        messages: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: messages.append(record.getMessage())
        logging.getLogger(name).addHandler(handler)
        attached.append((name, handler))
        return messages

    yield attach
    for name, handler in attached:
        logging.getLogger(name).removeHandler(handler)


@pytest.fixture(scope="session")
def mistranslated_model():
    """An imported model whose reference outputs are not what TVM computes of it, as where TVM imports an
    operator otherwise than its framework runs it: it computes ``relu(x) + x``, its reference says ``2 x``."""
    import numpy as np
    from tvm import relax

    from tunewise.importing import frontend

    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 8), "float32"))
    with builder.function("main", [x]):
        with builder.dataflow():
            out = builder.emit_output(relax.op.add(builder.emit(relax.op.nn.relu(x)), x))
        builder.emit_func_output(out)
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    return frontend.ImportedModel("mistranslated", builder.get(), (x,), (2 * x,))


@pytest.fixture(scope="session")
def tuned_store(tiny_mlp, measurer, tmp_path_factory):
    """A SQLite store with two short real tuning runs of tiny-mlp, of different schedulers.

    Returns ``(store, [first session, second session], events of the first)``: round-robin with 20 trials
    (at most 12 a task, 6 a slot), then random with 6 (3 a slot).
    """
    from tunewise import schedulers, stores
    from tunewise.callbacks import SlotLog
    from tunewise.tuning import session

    store = stores.create(f"sqlite:///{tmp_path_factory.mktemp('tuned')}/tunewise.db")
    log, sessions = SlotLog(), []
    for name, budget, per_slot in (("round-robin", session.Budget(max_trials=20, per_task_trials=12), 6),
                                   ("random", session.Budget(max_trials=6), 3)):
        run = store.create_run(tiny_mlp.name, str(tiny_mlp.target), name, {})
        sessions.append(session.Session(tiny_mlp, schedulers.create_seeded(name, 0), budget, measurer, store, run,
                                        session.SessionParts(trials_per_slot=per_slot,
                                                             callbacks=[log] if not sessions else [])))
        sessions[-1].run()
    return store, sessions, log.slots


class TuneProcess:
    """A real ``tunewise tune --no-references --timing-rounds 3 ARGS`` process in a process group of its own (as a
    shell starts a command), its output going to a file."""

    def __init__(self, folder, args):
        self._log_path = folder / f"tune-{len(list(folder.glob('tune-*.log')))}.log"
        with open(self._log_path, "w") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "tunewise.cli", "tune", "--no-references",
                                             "--timing-rounds", "3", *args],
                                            cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.process.pid

    def output(self) -> str:
        return self._log_path.read_text()

    def wait_for_trials(self, store, count: int, timeout: float = 600) -> None:
        """Until the store holds ``count`` trials (of any run)."""
        deadline = time.monotonic() + timeout
        while store.count_trials() < count:
            assert self.process.poll() is None, f"tune exited early with {self.process.returncode}: {self.output()}"
            assert time.monotonic() < deadline, "no trials recorded in time"
            time.sleep(0.2)

    def wait_for_output(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            assert self.process.poll() is None, f"tune exited early with {self.process.returncode}: {self.output()}"
            assert time.monotonic() < deadline, f"{text!r} not printed in time"
            time.sleep(0.1)

    def wait(self, timeout: float = 300) -> int:
        return self.process.wait(timeout=timeout)

    def pause(self, store_path) -> None:
        """SIGSTOP to the process group, at a moment it holds no write lock on the SQLite store at ``store_path``:
        it stays alive, and the store's other users go on while it is stopped."""
        while True:
            os.killpg(self.pid, signal.SIGSTOP)
            database = sqlite3.connect(store_path, timeout=0, isolation_level=None)
            try:
                database.execute("BEGIN IMMEDIATE")
                database.execute("ROLLBACK")
                return
            except sqlite3.OperationalError:  # stopped inside a write: let it finish that
                os.killpg(self.pid, signal.SIGCONT)
                time.sleep(0.05)
            finally:
                database.close()

    def kill(self) -> None:
        """SIGKILL to the process group, if it still runs."""
        if self.process.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def tune_process(tmp_path):
    """Starts :class:`TuneProcess` es in ``tmp_path``: ``tune_process("tiny-mlp", "--trials", "8")``; those
    still running at the end are killed."""
    started = []

    def start(*args) -> TuneProcess:
        started.append(TuneProcess(tmp_path, [str(a) for a in args]))
        return started[-1]

    yield start
    for process in started:
        process.kill()


@pytest.fixture(scope="session")
def _postgres_database():
    """The URL of a database of its own for this test process on the PostgreSQL server
    ``TUNEWISE_TEST_POSTGRES_URL`` names (``scripts/test`` starts one): that database itself, or, under
    pytest-xdist, one per worker created beside it; ``None`` without a server."""
    import sqlalchemy

    url = os.environ.get("TUNEWISE_TEST_POSTGRES_URL")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not url or not worker:
        return url
    base = sqlalchemy.make_url(url.replace("postgresql://", "postgresql+psycopg://", 1))
    name = f"{base.database}_{worker}"
    engine = sqlalchemy.create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        if conn.exec_driver_sql("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).first() is None:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    engine.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


@pytest.fixture
def postgres_url(_postgres_database):
    """The URL of this test process's PostgreSQL database (see ``_postgres_database``), with an empty schema;
    the test is skipped without a server."""
    import sqlalchemy

    url = _postgres_database
    if not url:
        pytest.skip("TUNEWISE_TEST_POSTGRES_URL is not set (scripts/test starts a PostgreSQL server and sets it)")
    engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP SCHEMA IF EXISTS public CASCADE")
        conn.exec_driver_sql("CREATE SCHEMA public")
    engine.dispose()
    return url


@pytest.fixture(scope="session")
def password_postgres():
    """``(url, password)`` of a throwaway PostgreSQL server on loopback whose role ``tuner`` logs in with a
    password (scram-sha-256); skipped when PostgreSQL is not installed."""
    import glob
    import shutil
    import socket
    import tempfile

    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda b: int(b.split("/")[-2]))
    if not bins:
        pytest.skip("PostgreSQL is not installed")
    folder = tempfile.mkdtemp(prefix="tunewise-pg.")  # not under pytest's root-only folder
    run_as = []
    if os.getuid() == 0:  # the server refuses to run as root
        shutil.chown(folder, "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data, password = os.path.join(folder, "data"), "Sekr3t-Pa55word"

    def pg(*args):
        subprocess.run([*run_as, os.path.join(bins[-1], args[0]), *args[1:]], check=True, capture_output=True)

    pg("initdb", "-D", data, "-A", "trust", "-U", "postgres")
    with open(os.path.join(data, "pg_hba.conf"), "w") as f:
        f.write("local all all trust\nhost all postgres 127.0.0.1/32 trust\n"
                "host all tuner 127.0.0.1/32 scram-sha-256\n")
    pg("pg_ctl", "-D", data, "-l", os.path.join(folder, "log"), "-w", "-s", "-o",
       f"-c listen_addresses=127.0.0.1 -p {port} -k {folder}", "start")
    try:
        pg("psql", "-h", folder, "-p", str(port), "-U", "postgres", "-c",
           f"CREATE ROLE tuner LOGIN PASSWORD '{password}'")
        pg("createdb", "-h", folder, "-p", str(port), "-U", "postgres", "-O", "tuner", "tunewise_password")
        yield f"postgresql+psycopg://tuner:{password}@127.0.0.1:{port}/tunewise_password", password
    finally:
        pg("pg_ctl", "-D", data, "-m", "fast", "-s", "stop")
        shutil.rmtree(folder)
