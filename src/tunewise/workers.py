"""Worker processes for TVM's part of tuning (building and running candidates), started without PyTorch.

TVM's FFI imports PyTorch whenever it is installed: 2 s of CPU and 200 MB in every process here, and nothing
a worker does needs it. :class:`WorkerPool` runs jobs in TVM's popen workers (fresh interpreters, not forks of
this one; a time limit per job, and a worker that runs past it or dies is replaced at its next job) whose
processes run :mod:`tunewise._worker_entry`: TVM's worker loop in an interpreter that cannot import PyTorch
and ignores SIGINT (the tuning process decides when to stop, and a Ctrl-C to the process group leaves the
jobs in flight intact).
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import subprocess
import sys
import threading
from collections.abc import Callable

from tvm.support.popen_pool import PopenWorker


class _Worker(PopenWorker):
    """A TVM popen worker whose process is :mod:`tunewise._worker_entry`, importing what this process can."""

    def _start(self) -> None:
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
        return self._threads.submit(self._call, fn, args)

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
