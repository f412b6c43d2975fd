"""Worker processes for TVM's part of tuning (building and running candidates), started without PyTorch.

TVM's FFI imports PyTorch whenever it is installed, at a cost in CPU and memory in every process, and nothing
a worker does needs it. :class:`WorkerPool` runs jobs in TVM's popen workers (a time limit per job, and a
worker that runs past it or dies is replaced at its next job). Their processes are forked by this process's
zygote (:mod:`tunewise.tuning._worker_entry`), a process that imported TVM once, cannot import PyTorch and
ignores SIGINT (the tuning process decides when to stop): a fresh interpreter started on the first worker, or
a fork of the ``tunewise`` program as it starts (:func:`fork_zygote`).

A process keeps the pools it is done with (:func:`give_back`) for the next one that would start the same
processes (:func:`borrow`): every ``tunewise.tune`` in a notebook or test process after the first finds its
builders and runner started.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable

import psutil
from tvm.support.popen_pool import PopenWorker


class _Worker(PopenWorker):
    """A TVM popen worker whose process is forked by this process's :class:`_Zygote`. A kill while the process
    starts (a pool shut down as it starts its workers) waits for the start, then kills it."""

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
            try:
                self._proc = _fork(child_read, child_write, self._stdout, self._stderr)
            finally:
                os.close(child_read)
                os.close(child_write)
            self._reader = os.fdopen(parent_read, "rb")
            self._writer = os.fdopen(parent_write, "wb")


class _Forked:
    """A worker the zygote forked, standing for the ``subprocess.Popen`` TVM's popen worker keeps: the
    zygote's child, not this process's, so it is watched by its pid."""

    def __init__(self, pid: int):
        self.pid = pid

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def poll(self) -> int | None:
        """``None`` while the process runs (its exit status is the zygote's to collect: -9 once it ended)."""
        try:
            running = psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            running = False
        return None if running else -signal.SIGKILL

    def wait(self, timeout: float | None = None) -> int:
        try:
            psutil.Process(self.pid).wait(timeout)
        except psutil.NoSuchProcess:
            pass
        except psutil.TimeoutExpired:
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout) from None
        return -signal.SIGKILL


class _Zygote:
    """A process that imported TVM once (:mod:`tunewise.tuning._worker_entry`) and forks the workers: a worker is ready
    in milliseconds instead of a fresh interpreter importing TVM for 2 CPU-seconds. Each worker gets the
    environment, search path and CPU affinity of this process at its request."""

    def __init__(self, process, sock: socket.socket):
        self._process, self._socket = process, sock
        self._lock = threading.Lock()

    @classmethod
    def start(cls) -> _Zygote:
        """A zygote in a fresh interpreter."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        search_path = os.pathsep.join(p for p in sys.path if p)
        with theirs:
            process = subprocess.Popen(
                [sys.executable, "-m", "tunewise.tuning._worker_entry", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env={**os.environ, "PYTHONPATH": search_path})
        return cls(process, mine)

    @classmethod
    def fork_here(cls) -> _Zygote:
        """A zygote forked from this process, which has imported TVM and runs no other thread."""
        from tunewise.tuning import _worker_entry

        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                mine.close()
                _worker_entry.isolate()
                _worker_entry.serve(theirs)
            finally:
                os._exit(0)
        theirs.close()
        return cls(_Forked(pid), mine)

    def fork(self, fds: list[int]) -> int:
        """The pid of a worker forked with the descriptors ``fds`` (job pipe, result pipe, output, error)."""
        from tunewise.tuning._worker_entry import PID

        inherited = {"environment": dict(os.environ), "path": sys.path,
                     "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []}
        with self._lock:
            socket.send_fds(self._socket, [json.dumps(inherited).encode()], fds)
            answer = self._socket.recv(PID.size)
        if len(answer) != PID.size:
            raise ChildProcessError("the worker zygote ended")
        return PID.unpack(answer)[0]

    def close(self) -> None:
        self._socket.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


_zygote: _Zygote | None = None  # this process's
_zygote_lock = threading.Lock()


def fork_zygote() -> bool:
    """Fork this process's zygote from this process now, if it has imported TVM but not PyTorch, runs no other
    thread and has no zygote yet: its workers then cost no import of TVM at all. The ``tunewise`` program does
    so as it starts. Whether it forked one."""
    global _zygote
    if "tvm" not in sys.modules or sys.modules.get("torch") is not None or threading.active_count() != 1:
        return False
    with _zygote_lock:
        if _zygote is not None:
            return False
        _zygote = _Zygote.fork_here()
    return True


def _fork(read: int, write: int, stdout, stderr) -> _Forked:
    """A worker on the pipes ``read`` and ``write``, its output ``stdout`` and ``stderr`` as ``subprocess.Popen``
    takes them (``None``: this process's now), forked by this process's zygote (started now if it has none, or
    again if it ended)."""
    global _zygote
    streams = [_descriptor(stdout, 1), _descriptor(stderr, 2)]
    try:
        for attempt in range(2):
            with _zygote_lock:
                if _zygote is None:
                    _zygote = _Zygote.start()
                zygote = _zygote
            try:
                return _Forked(zygote.fork([read, write, *(fd for fd, _ in streams)]))
            except (ChildProcessError, OSError):
                with _zygote_lock:
                    if _zygote is zygote:
                        _zygote = None
                zygote.close()
                if attempt:
                    raise
    finally:
        for fd, opened in streams:
            if opened:
                os.close(fd)


def _descriptor(stream, default: int) -> tuple[int, bool]:
    """The file descriptor of ``stream`` as ``subprocess.Popen`` takes it (``None`` for ``default``), and whether
    it was opened here."""
    if stream is None:
        return default, False
    if stream == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_WRONLY), True
    return (stream if isinstance(stream, int) else stream.fileno()), False


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
        self.restart()
        self._threads.shutdown(wait=True)
        self.restart()  # a process a job started meanwhile

    def restart(self) -> None:
        """Kill the worker processes (a job in flight fails): each next job starts a fresh one."""
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
    global _zygote
    with _zygote_lock:
        zygote, _zygote = _zygote, None
    if zygote is not None:
        zygote.close()
