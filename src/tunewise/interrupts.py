"""Stopping a command cleanly on Ctrl-C (SIGINT) and SIGTERM.

Python's own Ctrl-C raises :class:`KeyboardInterrupt` wherever the main thread is, TVM's native code and the
Python callbacks it calls (the cost model, the store's MetaSchedule database) included, where it can abort
the process. Inside :func:`handled`, a signal only records a stop request, and the command stops at its next
safe point (:func:`raise_if_stopped`: between phases, between slots, between candidates):

- the first SIGINT asks to stop after the slot in flight, which is finished and recorded;
- SIGTERM, or a second signal, asks to stop at once: the slot in flight is dropped at its next candidate;
- a third signal raises :class:`Interrupted` where the main thread is.

The stop raises :class:`Interrupted` (a :class:`KeyboardInterrupt`), whose ``exit_code`` is the shell's for
the signal (130, 143). The build and run worker processes ignore SIGINT (:func:`ignore_in_worker`), so a
Ctrl-C sent to the whole process group leaves the slot in flight intact.
"""

from __future__ import annotations

import contextlib
import signal
import threading

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_requests: list[int] = []  # the signals received inside handled(), in order


class Interrupted(KeyboardInterrupt):
    """A command stopped by signal ``signum``; ``run`` is the run it left (``None``: it had made none) in the
    store at ``store_url``."""

    def __init__(self, signum: int = signal.SIGINT, run: int | None = None, store_url: str | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.run, self.store_url = signum, run, store_url

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def of_run(self, run: int | None, store_url: str | None) -> Interrupted:
        """The same stop, of run ``run`` of the store at ``store_url``."""
        return Interrupted(self.signum, run, store_url)


def _handle(signum, _frame) -> None:
    _requests.append(signum)
    if len(_requests) >= 3:
        raise Interrupted(_requests[0])


def requested() -> bool:
    """Whether a stop was asked for."""
    return bool(_requests)


def raise_if_stopped(*, at_once: bool = False) -> None:
    """Raise :class:`Interrupted` if a stop was asked for (with ``at_once``: only a stop at once)."""
    if _requests and (not at_once or len(_requests) >= 2 or signal.SIGTERM in _requests):
        raise Interrupted(_requests[0])


@contextlib.contextmanager
def handled():
    """Within the block, SIGINT and SIGTERM ask for a stop instead of raising at once (see the module); in a
    thread other than the main one, where signals cannot be handled, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handle) for s in _SIGNALS}
    _requests.clear()
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _requests.clear()


def ignore_from_now() -> None:
    """Make this process ignore SIGINT and SIGTERM from now on: for a program whose command has ended and whose
    exit code is decided, so that a late Ctrl-C does not turn its exit into a death by the signal."""
    for s in _SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def ignore_in_worker() -> None:
    """Make this (worker) process ignore SIGINT: its parent decides when to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
