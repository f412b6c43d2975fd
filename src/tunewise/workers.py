"""Worker processes for TVM's part of tuning (building and running candidates), started without PyTorch.

TVM's FFI imports PyTorch whenever it is installed: 2 s of CPU and 200 MB in every process here, and nothing
a worker does needs it. :class:`WorkerPool` runs jobs in TVM's popen workers (fresh interpreters, not forks of
this one; a time limit per job, and a worker that runs past it or dies is replaced at its next job) whose
processes run :mod:`tunewise._worker_entry`: TVM's worker loop in an interpreter that cannot import PyTorch
and ignores SIGINT (the tuning process decides when to stop, and a Ctrl-C to the process group leaves the
jobs in flight intact).

A process keeps the pools it is done with (:func:`give_back`) for the next one that would start the same
processes (:func:`borrow`): every ``tunewise.tune`` in a notebook or test process after the first finds its
builders and runner started, instead of three fresh interpreters importing TVM.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import os
import subprocess
import sys
import threading
from collections.abc import Callable

from tvm.support.popen_pool import PopenWorker


class _Worker(PopenWorker):
    """A TVM popen worker whose process is :mod:`tunewise._worker_entry`, importing what this process can. A
    kill while the process starts (a pool shut down as it starts its workers) waits for the start, then kills
    it."""

    def __init__(self, *args, **kwargs):
        self._starting = threading.RLock()
        super().__init__(*args, **kwargs)

    def kill(self) -> None:
        with self._starting:
            super().kill()

    def _start(self) -> None:
        with self._starting:
            if self._proc is not None:
                return
            parent_read, child_write = os.pipe()
            child_read, parent_write = os.pipe()
            search_path = os.pathsep.join(p for p in sys.path if p)
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tunewise._worker_entry", str(child_read), str(child_write)],
                pass_fds=(child_read, child_write), stdout=self._stdout, stderr=self._stderr,
                env={**os.environ, "PYTHONPATH": search_path})
            os.close(child_read)
            os.close(child_write)
            self._reader = os.fdopen(parent_read, "rb")
            self._writer = os.fdopen(parent_write, "wb")

class WorkerPool:
    """``workers`` worker processes, each job given ``timeout`` seconds (``None``: no limit). ``stderr`` is the
    processes' standard error (``None``: this process's). The processes start on the first jobs;
    :meth:`start` starts them all at once, in the background. A job's future raises ``TimeoutError`` when it
    ran past the limit, ``ChildProcessError`` when its process died, and the job's own exception (its message
    holding the worker's traceback) when it failed.
    """

    def __init__(self, workers: int, *, timeout: float | None = None, stderr=None):
        self.workers = workers
        self._timeout, self._stderr = timeout, stderr
        self._threads = cf.ThreadPoolExecutor(workers, thread_name_prefix="tunewise-worker")
        self._local = threading.local()
        self._started: list[_Worker] = []
        self._lock = threading.Lock()
        self._in_flight = 0

    def _call(self, fn: Callable, args: tuple):
        worker = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._local.worker = _Worker(stderr=self._stderr)
            with self._lock:
                self._started.append(worker)
        worker.send(fn, args, {}, self._timeout)
        return worker.recv()

    def submit(self, fn: Callable, *args) -> cf.Future:
        """Run ``fn(*args)`` (picklable) in a worker process."""
        with self._lock:
            self._in_flight += 1
        future = self._threads.submit(self._call, fn, args)
        future.add_done_callback(self._done)
        return future

    def _done(self, _future: cf.Future) -> None:
        with self._lock:
            self._in_flight -= 1

    @property
    def idle(self) -> bool:
        """Whether no job is queued or running."""
        with self._lock:
            return self._in_flight == 0

    def start(self) -> None:
        """Start every worker process now, in the background."""
        for _ in range(self.workers):
            self.submit(_ready)

    def shutdown(self) -> None:
        """Stop the worker processes (a job in flight fails) and wait for the pool's threads."""
        self._kill()
        self._threads.shutdown(wait=True)
        self._kill()  # a process a job started meanwhile

    def _kill(self) -> None:
        with self._lock:
            for worker in self._started:
                worker.kill()


def _ready() -> None:
    """A job that only starts its worker."""


_kept: dict[tuple, list[WorkerPool]] = {}  # idle pools by the state their processes were started in
_lent: dict[WorkerPool, tuple] = {}  # borrowed pools and that state
_kept_lock = threading.Lock()


_READ_BY_WORKERS = ("TVM_", "CUDA_", "TUNEWISE_", "PATH", "LD_LIBRARY_PATH")
"""The environment variables (names or prefixes) whose values a worker's TVM or tunewise reads: the thread count
of TVM's kernels, its CUDA compiler, where the tools are. Libraries set others as they load (PyTorch's
``KMP_*``, say); those do not make a new pool."""


def _starting_state(workers: int, timeout: float | None, stderr) -> tuple:
    """What a new pool's processes would be started with: its size and limit, and the environment
    (:data:`_READ_BY_WORKERS`), search path and CPU affinity they inherit from this process."""
    environment = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(_READ_BY_WORKERS)))
    affinity = tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()
    return workers, timeout, stderr, environment, tuple(sys.path), affinity


def borrow(workers: int, *, timeout: float | None = None, stderr=None) -> WorkerPool:
    """A started :class:`WorkerPool` (arguments as there): one this process kept (:func:`give_back`) whose
    processes were started as a new one's would be now, else a new one, its processes starting in the
    background."""
    state = _starting_state(workers, timeout, stderr)
    with _kept_lock:
        kept = _kept.get(state)
        pool = kept.pop() if kept else None
        if pool is None:
            pool = WorkerPool(workers, timeout=timeout, stderr=stderr)
            pool.start()
        _lent[pool] = state
    return pool


def give_back(pool: WorkerPool) -> None:
    """Keep a pool from :func:`borrow` for the next one borrowed, or shut it down when a job is still queued
    or running in it (its outcome would reach nobody, and its worker would not be free). The kept pools are
    shut down when this process exits."""
    with _kept_lock:
        state = _lent.pop(pool)
        if pool.idle:
            _kept.setdefault(state, []).append(pool)
            return
    pool.shutdown()


@atexit.register
def _shut_down_kept() -> None:
    with _kept_lock:
        pools = [pool for kept in _kept.values() for pool in kept]
        _kept.clear()
    for pool in pools:
        pool.shutdown()
