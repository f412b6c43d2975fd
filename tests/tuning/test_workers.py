"""The worker processes that build and run candidates: fresh interpreters without PyTorch that ignore Ctrl-C, a
time limit per job, and a worker that died or ran past it replaced at the next job."""

import os
import signal
import sys
import time

import pytest

from tunewise.tuning.workers import WorkerPool

pytestmark = pytest.mark.tvm


def _state() -> tuple:
    import tvm  # noqa: F401  (TVM's FFI imports PyTorch when it can)

    return os.getpid(), sys.modules.get("torch", "never imported"), signal.getsignal(signal.SIGINT)


def _sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _fail() -> None:
    raise ValueError("the job's own error")


def test_a_worker_imports_tvm_without_pytorch_ignores_ctrl_c_and_outlives_its_jobs():
    pool = WorkerPool(1)
    try:
        pid, torch, on_sigint = pool.submit(_state).result()
        assert torch is None  # blocked, not imported
        assert on_sigint == signal.SIG_IGN  # the tuning process decides when to stop
        assert pid != os.getpid()
        assert pool.submit(_state).result()[0] == pid  # the same process serves the next job
    finally:
        pool.shutdown()


def test_a_job_past_its_time_limit_or_one_that_kills_its_worker_fails_alone():
    pool = WorkerPool(1, timeout=1.0)
    try:
        first = pool.submit(_state).result()[0]
        with pytest.raises(TimeoutError):
            pool.submit(_sleep, 30).result()
        second = pool.submit(_state).result()[0]
        assert second != first  # the worker that ran past the limit was replaced
        with pytest.raises(ChildProcessError, match="Subprocess terminated"):
            pool.submit(_die).result()
        with pytest.raises(ValueError, match="the job's own error"):
            pool.submit(_fail).result()
        last = pool.submit(_state).result()[0]
        assert last != second
    finally:
        pool.shutdown()
    with pytest.raises(ProcessLookupError):
        os.kill(last, 0)  # the pool's processes end with it


def _parent_after(seconds: float) -> tuple[int, int]:
    time.sleep(seconds)
    return os.getpid(), os.getppid()


def _both_workers(pool) -> list[tuple[int, int]]:
    """``(pid, parent pid)`` of the two workers of ``pool``, each given a job at once."""
    jobs = [pool.submit(_parent_after, 0.5), pool.submit(_parent_after, 0.0)]
    return [job.result() for job in jobs]


def test_workers_are_forks_of_one_zygote_started_again_once_it_ended():
    """The workers are forked by one process that imported TVM (the zygote), not started by this one; a worker
    outlives a zygote that ended, and the next worker needed starts another zygote."""
    import psutil

    pool = WorkerPool(2)
    try:
        (worker, zygote), (other, other_zygote) = _both_workers(pool)
        assert zygote == other_zygote != os.getpid() and worker != other
        assert "tunewise.tuning._worker_entry" in psutil.Process(zygote).cmdline()
        os.kill(zygote, signal.SIGKILL)
        assert {pid for pid, _ in _both_workers(pool)} == {worker, other}  # they still serve
        with pytest.raises(ChildProcessError):
            pool.submit(_die).result()
        pids = dict(_both_workers(pool))
        [new] = set(pids) - {worker, other}
        assert pids[new] != zygote and "tunewise.tuning._worker_entry" in psutil.Process(pids[new]).cmdline()
    finally:
        pool.shutdown()


def test_a_pool_given_back_serves_the_next_borrower_started_alike_and_one_busy_is_shut_down(monkeypatch):
    from tunewise.tuning import workers

    first = workers.borrow(1, timeout=20.0)
    pid = first.submit(_state).result()[0]
    workers.give_back(first)
    again = workers.borrow(1, timeout=20.0)
    assert again is first and again.submit(_state).result()[0] == pid  # started once, kept by the process

    monkeypatch.setenv("TVM_NUM_THREADS", "1")  # processes started now would inherit another environment
    other = workers.borrow(1, timeout=20.0)
    assert other is not first
    workers.give_back(other)
    monkeypatch.undo()

    again.submit(_sleep, 30)
    workers.give_back(again)  # a job still runs in it: not kept
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    fresh = workers.borrow(1, timeout=20.0)
    try:
        assert fresh is not first and fresh.submit(_state).result()[0] != pid
    finally:
        workers.give_back(fresh)


def test_a_worker_killed_while_its_process_starts_is_killed_once_started(monkeypatch):
    """A pool shut down as it starts its workers (a measurer closed at once): the kill waits for the start."""
    import threading

    from tunewise.tuning import workers

    worker, procs, errors = workers._Worker(), [], []
    opening, release = threading.Event(), threading.Event()
    fdopen = os.fdopen

    def slow_fdopen(*args, **kwargs):  # the start holds here, its process running, until released
        if not procs:
            procs.append(worker._proc)
            opening.set()
            release.wait(10)
        return fdopen(*args, **kwargs)

    def kill():
        try:
            worker.kill()
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    monkeypatch.setattr(workers.os, "fdopen", slow_fdopen)
    starting = threading.Thread(target=worker._start)
    starting.start()
    assert opening.wait(10)
    killing = threading.Thread(target=kill)
    killing.start()
    time.sleep(0.2)
    release.set()
    starting.join(10)
    killing.join(10)
    assert errors == [] and worker._proc is None
    assert procs[0].wait(timeout=10) is not None  # the process is gone


_FORKING_PROGRAM = """
import json, os, sys
import psutil
from tunewise.tuning import tvm_env
tvm_env.import_tvm()
from tunewise.tuning import workers
forked = workers.fork_zygote()
os.environ["TUNEWISE_TEST_LATE"] = "set after the fork"

def probe():
    return os.getpid(), os.getppid(), repr(sys.modules.get("torch", "never imported")), \\
        os.environ.get("TUNEWISE_TEST_LATE")

pool = workers.WorkerPool(1)
try:
    pid, parent, torch, late = pool.submit(probe).result()
finally:
    pool.shutdown()
print(json.dumps({"forked": forked, "again": workers.fork_zygote(), "me": os.getpid(), "pid": pid,
                  "parent": parent, "grandparent": psutil.Process(parent).ppid(), "torch": torch, "late": late}))
"""


def test_a_program_that_imported_tvm_forks_its_zygote_from_itself():
    """As the ``tunewise`` program does: the zygote is the program's own child, forked once; its workers get
    PyTorch blocked and the environment of the moment they are asked for."""
    import json
    import subprocess

    import psutil

    proc = subprocess.run([sys.executable, "-c", _FORKING_PROGRAM], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["forked"] and not seen["again"]
    assert seen["grandparent"] == seen["me"] != seen["parent"]  # the worker's parent: the program's child
    assert seen["torch"] == "None" and seen["late"] == "set after the fork"
    assert not psutil.pid_exists(seen["parent"])  # the zygote ended with its program
