"""One owner per run: a process that tunes a run holds its lease, kept alive by a heartbeat.

The store keeps each run's owner and the owner's last heartbeat (:meth:`tunewise.stores.Store.claim_run`). A
:class:`Lease` claims a run (or holds one created with it as owner), beats its heartbeat every
:data:`~tunewise.stores.HEARTBEAT_INTERVAL` seconds from a background thread, and gives the run up when it
ends. A second process that claims the run meanwhile gets :class:`~tunewise.errors.RunBusyError`. An owner gone
without giving the run up is known to be dead at once on its own host, and anywhere once its heartbeat is older
than :data:`~tunewise.stores.HEARTBEAT_STALE` seconds: the run then shows as ``dead``, and another process may
claim it. The tuning loop commits each slot only while it holds the lease (``add_trials(..., owner=...)``), so
two processes never record the same run.
"""

from __future__ import annotations

import threading

from tunewise.errors import RunBusyError
from tunewise.stores import _base


class Lease:
    """This process's ownership of one run while the ``with`` block runs: :meth:`claim` an existing run, or
    :meth:`hold` one created with :attr:`owner` as its owner; the block's end gives it up.

    ``interval`` is the time between heartbeats (default :data:`~tunewise.stores.HEARTBEAT_INTERVAL`). A
    heartbeat that fails to write is skipped: the next slot's commit reports what is wrong with the store.
    """

    def __init__(self, *, interval: float | None = None):
        self.owner = _base.owner_name()
        self.store, self.run = None, None
        self.interval = _base.HEARTBEAT_INTERVAL if interval is None else interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="tunewise-heartbeat", daemon=True)

    def claim(self, store, run: int) -> None:
        """Own run ``run`` of ``store``; raises :class:`~tunewise.errors.RunBusyError` when another live process
        owns it."""
        try:
            store.claim_run(run, self.owner)
        except RunBusyError:
            holder = store.get_run(run).owner
            if not _base.owner_gone(holder):
                raise
            store.claim_run(run, self.owner, gone=holder)
        self.hold(store, run)

    def hold(self, store, run: int) -> None:
        """Keep the heartbeat of run ``run`` of ``store``, created or claimed with :attr:`owner`."""
        self.store, self.run = store, run
        self._thread.start()

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc) -> None:
        if self.run is None:
            return
        self._stop.set()
        self._thread.join()
        try:
            self.store.release_run(self.run, self.owner)
        except Exception:  # noqa: BLE001 (an unwritable store: the heartbeat goes stale, the run shows as dead)
            if exc[1] is None:
                raise

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if not self.store.beat(self.run, self.owner):
                    return  # taken over: the next commit of a slot stops this process
            except Exception:  # noqa: BLE001, S112 (see the class docstring)
                continue
