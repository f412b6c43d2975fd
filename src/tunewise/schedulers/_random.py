"""Uniformly random choice among the live tasks."""

from __future__ import annotations

import numpy as np

from tunewise.schedulers._base import TaskScheduler
from tunewise.tuning.state import Snapshot


class Random(TaskScheduler):
    """Give the slot to a live task drawn uniformly at random (DynaTune's "DA + Rand" baseline).

    Owns a ``numpy.random.Generator`` seeded with ``seed``; two instances with the same integer seed shown
    the same snapshots make the same choices.

    >>> from tunewise.tuning.state import Snapshot, TaskView
    >>> snapshot = Snapshot(tuple(TaskView(i, str(i), 1, 1e6, 1e-3) for i in range(8)))
    >>> a, b = Random(seed=3), Random(seed=3)
    >>> [a.next(snapshot) for _ in range(5)] == [b.next(snapshot) for _ in range(5)]
    True
    """

    def __init__(self, *, seed: int | None = None):
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def next(self, snapshot: Snapshot) -> int | None:
        live = snapshot.live
        return live[int(self._rng.integers(len(live)))].index if live else None
