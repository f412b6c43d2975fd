"""Candidates run on devices registered with a TVM RPC tracker: MetaSchedule's ``RPCRunner``."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from dataclasses import dataclass

from tunewise.candidate_runners._arguments import alloc_arguments
from tunewise.candidate_runners._base import CandidateRunner
from tunewise.errors import InputError, message_line

PREFIX = "rpc://"
_ANSWER_SECONDS = 5.0  # how long a tracker has to accept a connection
_ADDRESS = re.compile(r"^rpc://([^:/]+):(\d+)/([^/]+)$")


def parse(spec: str) -> tuple[str, int, str]:
    """``rpc://HOST:PORT/KEY`` -> ``(host, port, key)``; :class:`~tunewise.errors.InputError` otherwise."""
    match = _ADDRESS.match(spec)
    if not match:
        raise InputError(f"bad RPC runner {spec!r}: expected rpc://TRACKER_HOST:PORT/DEVICE_KEY")
    return match.group(1), int(match.group(2)), match.group(3)


@dataclass(frozen=True)
class _WithoutSession:
    """A local runner's function (argument allocation, evaluator) as the RPC runner calls it, with the RPC
    session first: the session is dropped, the device and module it gives are remote ones."""

    function: Callable

    def __call__(self, session, *args):
        return self.function(*args)


class RPC(CandidateRunner):
    """Each candidate runs on a device that the TVM RPC tracker at ``host:port`` hands out under ``key``
    (start the tracker with ``python -m tvm.exec.rpc_tracker --host HOST --port PORT`` and each device's server
    with ``python -m tvm.exec.rpc_server --tracker HOST:PORT --key KEY``). Its library is uploaded, its
    arguments are allocated on the device and the evaluator times it there through the session; a session
    that cannot be had within ``session_timeout`` seconds, or a candidate that runs past
    ``config.run_timeout``, is a failed candidate. The tracker must answer, and know a device of that key,
    when the runner is made: otherwise :class:`~tunewise.errors.InputError` says so in one line.
    """

    def __init__(self, *, target, config, host: str, port: int, key: str, session_timeout: float = 30.0):
        from tvm.s_tir.meta_schedule.runner import RPCConfig, RPCRunner

        from tunewise.job import interrupts
        from tunewise.target import device_type

        self.target, self.config, self.key = target, config, key
        self.address = f"{host}:{port}"
        _check_tracker(host, port, key)
        self._device = device_type(target)
        self._runner = RPCRunner(
            RPCConfig(tracker_host=host, tracker_port=port, tracker_key=key, session_timeout_sec=session_timeout),
            evaluator_config=config.evaluator(), f_alloc_argument=_WithoutSession(alloc_arguments), max_workers=1,
            initializer=interrupts.ignore_in_worker)

    def run(self, artifact: str, args_info, evaluator):
        from tvm.s_tir.meta_schedule.runner import RunnerInput

        self._runner.f_run_evaluator = _WithoutSession(evaluator)
        return self._runner.run([RunnerInput(artifact, self._device, args_info)])[0].result()

    def close(self) -> None:
        self._runner.pool.shutdown()


def _check_tracker(host: str, port: int, key: str) -> None:
    from tvm import rpc

    try:
        socket.create_connection((host, port), timeout=_ANSWER_SECONDS).close()  # TVM's client retries a minute
        summary = rpc.connect_tracker(host, port).summary()
    except Exception as err:  # socket errors, TVM errors: the tracker is not there
        raise InputError(f"cannot reach the RPC tracker at {host}:{port}: {message_line(err)}") from None
    keys = {entry.split(":")[0] for entry in summary.get("queue_info", {})}
    if key not in keys:
        known = ", ".join(sorted(keys)) or "none"
        raise InputError(f"the RPC tracker at {host}:{port} knows no device with key {key!r} (keys: {known})")
