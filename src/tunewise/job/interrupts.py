"""Stopping a command cleanly on Ctrl-C (SIGINT) and SIGTERM.

Python's own Ctrl-C raises :class:`KeyboardInterrupt` wherever the main thread is, TVM's native code and the
Python callbacks it calls (the cost model, the store's MetaSchedule database) included, where it can abort
the process. Inside :func:`handled`, a signal only records a stop request, and the command stops at its next
safe point (:func:`raise_if_stopped`: between phases, between slots, between candidates):

- the first SIGINT asks to stop after the slot in flight, which is finished and recorded;
- SIGTERM, or a second signal, asks to stop at once: the slot in flight is dropped at its next candidate;
- a third signal raises :class:`Interrupted` where the main thread is.

The stop raises :class:`Interrupted` (a :class:`KeyboardInterrupt`), whose ``exit_code`` is the shell's for
the signal (130, 143), and which tells what the stop kept and what it dropped (:meth:`Interrupted.describe`).
The build and run worker processes ignore SIGINT (:func:`ignore_in_worker`), so a Ctrl-C sent to the whole
process group leaves the slot in flight intact.
"""

from __future__ import annotations

import contextlib
import signal
import threading

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_requests: list[int] = []  # the signals received inside handled(), in order


class Interrupted(KeyboardInterrupt):
    """A command stopped by signal ``signum``; ``run`` is the run it left (``None``: it had made none) in the
    store at ``store_url``, holding ``kept`` trials (``None``: not known); ``dropped`` is how many candidates
    the slot in flight had when it was dropped (``None``: no slot was dropped)."""

    def __init__(self, signum: int = signal.SIGINT, run: int | None = None, store_url: str | None = None, *,
                 kept: int | None = None, dropped: int | None = None, said: str | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.run, self.store_url = signum, run, store_url
        self.kept, self.dropped, self.said = kept, dropped, said

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def of_run(self, run: int | None, store_url: str | None, kept: int | None = None) -> Interrupted:
        """The same stop, of run ``run`` of the store at ``store_url``, which holds ``kept`` trials."""
        return Interrupted(self.signum, run, store_url, kept=kept, dropped=self.dropped)

    def dropping(self, candidates: int) -> Interrupted:
        """The same stop, which dropped the slot in flight, of ``candidates`` candidates."""
        return Interrupted(self.signum, self.run, self.store_url, kept=self.kept, dropped=candidates)

    def saying(self, said: str) -> Interrupted:
        """The same stop, of a command that is not one run's: ``said`` is what it kept and how to continue."""
        return Interrupted(self.signum, said=said)

    def describe(self) -> str:
        """What the stop kept and dropped, in words: ``"interrupted (SIGTERM); the 4 trials measured are in the
        store, and the slot in flight, 2 candidates, was dropped"``."""
        name = signal.Signals(self.signum).name
        if self.said is not None:
            return f"interrupted ({name}); {self.said}"
        if self.kept is None:
            kept = "every trial measured so far is in the store"
        elif self.kept == 0:
            kept = "no trial was measured yet"
        elif self.kept == 1:
            kept = "the 1 trial measured is in the store"
        else:
            kept = f"the {self.kept} trials measured are in the store"
        dropped = "" if self.dropped is None else f", and the slot in flight, {self.dropped} candidates, was dropped"
        return f"interrupted ({name}); {kept}{dropped}"


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


@contextlib.contextmanager
def raised():
    """Within the block, SIGTERM raises :class:`Interrupted` at once, as SIGINT does (for a command whose work
    runs elsewhere and whose own process holds nothing to finish: ``tune-many``, on Ray)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        raise Interrupted(signum)

    previous = {s: signal.signal(s, stop) for s in _SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def ignore_from_now() -> None:
    """Make this process ignore SIGINT and SIGTERM from now on: for a program whose command has ended and whose
    exit code is decided, so that a late Ctrl-C does not turn its exit into a death by the signal."""
    for s in _SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def ignore_in_worker() -> None:
    """Make this (worker) process ignore SIGINT: its parent decides when to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
