"""One task at a time, heaviest first."""

from __future__ import annotations

from tunewise.schedulers._base import TaskScheduler
from tunewise.schedulers._prior import heaviest_first
from tunewise.tuning.state import Snapshot


class Sequential(TaskScheduler):
    """Give every slot to the first live task in :func:`~tunewise.schedulers._prior.heaviest_first` order
    (AutoTVM's baseline goes in declaration order).

    The order is fixed (default latencies do not change during a run), so a task keeps the tuner until the
    session marks it finished (its per-task budget is spent, or it stopped improving), then the next one
    takes over; this is the baseline of DynaTune (Wang et al., ICLR 2021).

    >>> from tunewise.tuning.state import Snapshot, TaskView
    >>> tasks = (TaskView(0, "a", 1, 1e6, 1e-3, finished=True), TaskView(1, "b", 1, 1e6, 1e-3))
    >>> Sequential().next(Snapshot(tasks))
    1
    """

    def next(self, snapshot: Snapshot) -> int | None:
        live = snapshot.live
        return heaviest_first(live)[0].index if live else None
