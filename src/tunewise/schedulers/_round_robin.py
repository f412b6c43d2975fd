"""Round-robin: every live task in turn."""

from __future__ import annotations

from tunewise.schedulers._base import TaskScheduler
from tunewise.schedulers._prior import heaviest_first
from tunewise.tuning.state import Snapshot


class RoundRobin(TaskScheduler):
    """Give the slot to the live task that has had the fewest slots, ties to the heaviest
    (:func:`~tunewise.schedulers._prior.heaviest_first`).

    From a fresh start this is a fixed cycle over the tasks, heaviest first, skipping finished tasks (the
    "DA + RR" scheme of DynaTune, Wang et al., ICLR 2021, which cycles in declaration order). It is
    stateless: the counts come from the snapshot, so a resumed run, or one that switched scheduler, first
    evens the counts out, then cycles.

    >>> from tunewise.tuning.state import Snapshot, TaskView
    >>> tasks = (TaskView(0, "a", 1, 1e6, 1e-3, best_history=(1e-3,)), TaskView(1, "b", 1, 1e6, 1e-3))
    >>> RoundRobin().next(Snapshot(tasks))
    1
    """

    def next(self, snapshot: Snapshot) -> int | None:
        live = snapshot.live
        fewest = min((t.slots for t in live), default=None)
        return heaviest_first(t for t in live if t.slots == fewest)[0].index if live else None
