"""Round-robin: every live task in turn."""

from __future__ import annotations

from tunewise.schedulers._base import TaskScheduler
from tunewise.state import Snapshot


class RoundRobin(TaskScheduler):
    """Give the slot to the live task that has had the fewest slots, ties to the earliest declared.

    From a fresh start this is exactly the cycle ``0, 1, ..., n-1, 0, 1, ...``, skipping finished tasks (the
    "DA + RR" scheme of DynaTune, Wang et al., ICLR 2021). It is stateless: the counts come from the snapshot,
    so a resumed run, or one that switched scheduler, first evens the counts out, then cycles.

    >>> from tunewise.state import Snapshot, TaskView
    >>> tasks = (TaskView(0, "a", 1, 1e6, 1e-3, best_history=(1e-3,)), TaskView(1, "b", 1, 1e6, 1e-3))
    >>> RoundRobin().next(Snapshot(tasks))
    1
    """

    def next(self, snapshot: Snapshot) -> int | None:
        live = snapshot.live
        return min(live, key=lambda t: t.slots).index if live else None
