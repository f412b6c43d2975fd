"""Tuning effort in proportion to each task's share of the model's FLOPs."""

from __future__ import annotations

from tunewise.schedulers._base import TaskScheduler
from tunewise.schedulers._prior import heaviest_first
from tunewise.tuning.state import Snapshot


class Flops(TaskScheduler):
    """Give the slot to the live task with the smallest ``trials / (flops * weight)``, ties to the heaviest
    (:func:`~tunewise.schedulers._prior.heaviest_first`), so the untried tasks go first, heaviest first.

    ``flops * weight`` is the task's share of the model's FLOPs, so over many slots each task's trials grow
    in proportion to it, until it finishes: the "linear in FLOPs" static scheme of DynaTune (Wang et al.,
    ICLR 2021), with trials standing in for tuning time. A task with no FLOPs counts as one FLOP, as in
    MetaSchedule, so it still gets a (tiny) share.

    >>> from tunewise.tuning.state import Snapshot, TaskView
    >>> tasks = (TaskView(0, "big", 1, 3e6, 1e-3, trials=32), TaskView(1, "small", 1, 1e6, 1e-3, trials=16))
    >>> Flops().next(Snapshot(tasks))  # 32 / 3e6 < 16 / 1e6
    0
    """

    def next(self, snapshot: Snapshot) -> int | None:
        live = snapshot.live
        if not live:
            return None
        def share(t) -> float:
            return t.trials / (max(t.flops, 1.0) * max(t.weight, 1))

        lowest = min(share(t) for t in live)
        return heaviest_first(t for t in live if share(t) == lowest)[0].index
