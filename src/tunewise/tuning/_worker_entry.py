"""The program of a :mod:`tunewise.tuning.workers` zygote: ``python -m tunewise.tuning._worker_entry SOCKET``.

It ignores SIGINT from its start and blocks ``import torch`` (:func:`isolate`), imports TVM and its MetaSchedule
once, then serves the Unix socket whose descriptor is SOCKET: each request carries four descriptors (the job pipe's
read end, the result pipe's write end, the standard output and error the worker is to have) and what the worker
inherits (environment, search path, CPU affinity), and is answered with the pid of a worker forked for it, running
TVM's popen worker loop on those pipes. The zygote ends when the socket closes; its workers end when their pipes
close. A process that has imported TVM (without PyTorch) may also fork its zygote from itself
(:func:`tunewise.tuning.workers.fork_zygote`).
"""

import json
import os
import signal
import socket
import struct
import sys
import traceback

PID = struct.Struct("<q")
"""How the zygote answers a request: the worker's pid."""
REQUEST_BYTES = 1 << 20
"""The most a request's text may take."""


def isolate() -> None:
    """Make this process a zygote's: it ignores SIGINT (its parent decides when to stop) and ``import torch``
    fails in it and its workers (TVM's FFI then skips PyTorch). First, before TVM is imported."""
    from tunewise.job import interrupts

    interrupts.ignore_in_worker()
    sys.modules.setdefault("torch", None)


def serve(sock: socket.socket) -> None:
    """Fork a worker for every request on ``sock`` (a ``SOCK_SEQPACKET`` socket) until it closes; AMX's tiles
    asked for first, where the CPU has them, for the workers to inherit (their candidates may use them)."""
    from tunewise.lowering.amx import tiles_granted

    tiles_granted()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the workers are reaped as they end
    while True:
        try:
            request, fds, _, _ = socket.recv_fds(sock, REQUEST_BYTES, 4)
        except OSError:
            return
        if len(fds) != 4:  # the socket closed
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sock.close()
            _work(*fds, json.loads(request))
        for fd in fds:
            os.close(fd)
        sock.sendall(PID.pack(pid))


def _work(read: int, write: int, stdout: int, stderr: int, inherited: dict) -> None:
    """A forked worker: TVM's popen worker loop on the pipes ``read`` and ``write``, its output to ``stdout``
    and ``stderr``, with the ``environment``, search ``path`` and CPU ``affinity`` of ``inherited`` (what a
    process started by the requester would inherit from it now); never returns."""
    from tvm.exec import popen_worker

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # a job waits for the compilers it starts
    for fd, target in ((stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(inherited["environment"])
    sys.path[:] = inherited["path"]
    if inherited["affinity"]:
        os.sched_setaffinity(0, inherited["affinity"])
    sys.argv = [sys.argv[0], str(read), str(write)]
    code = 0
    try:
        popen_worker.main()
    except OSError:  # the parent went away
        pass
    except BaseException:  # noqa: BLE001 (a forked process must not return into the zygote's loop)
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    isolate()  # first: a Ctrl-C while TVM is imported would kill the zygote
    import tvm.exec.popen_worker  # noqa: F401
    from tvm.s_tir import meta_schedule  # noqa: F401  (what the builders' and runners' jobs use)

    serve(socket.socket(fileno=int(sys.argv[1])))
