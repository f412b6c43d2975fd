"""MetaSchedule's gradient-based task scheduler."""

from __future__ import annotations

import numpy as np

from tunewise._numbers import is_whole
from tunewise.schedulers._base import TaskScheduler
from tunewise.schedulers._prior import heaviest_first
from tunewise.tuning.state import Snapshot, TaskView


class Gradient(TaskScheduler):
    """TVM MetaSchedule's ``GradientBased`` scheduler (after Ansor, Zheng et al., OSDI 2020).

    First every live task without a slot gets one, heaviest first (TVM goes in declaration order). Then a task
    with ``n`` slots and history ``best`` scores ``(alpha * g1 + (1 - alpha) * g2) * weight``, where
    ``g1 = (best[n-1-window] - best[n-1]) / window`` (``0`` while ``n <= window``) and ``g2 = best[n-1] / n``;
    the highest score wins, ties to the earliest, and all-equal scores are drawn with the scheduler's generator.
    History entries are the task's current latency, ``min(best, default_latency)``, so a failing task counts
    with its untuned latency (TVM's ``1e100`` would let it win every slot). Latencies are in seconds.

    >>> from tunewise.tuning.state import Snapshot, TaskView
    >>> a = TaskView(0, "a", 1, 1e6, 1.0, best_history=(0.5, 0.4))
    >>> b = TaskView(1, "b", 2, 1e6, 1.0, best_history=(0.3,))
    >>> Gradient(seed=0).next(Snapshot((a, b)))  # 0.8 * 0.4 / 2 = 0.16 < 0.8 * 0.3 * 2 = 0.48
    1
    """

    def __init__(self, *, alpha: float = 0.2, window: int = 3, seed: int | None = None):
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
        if not is_whole(window) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        self.alpha = alpha
        self.window = window
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def score(self, task: TaskView) -> float:
        """The task's score; it must have had at least one slot."""
        best = [min(b, task.default_latency) for b in task.best_history]
        n, w = len(best), self.window
        g1 = (best[n - 1 - w] - best[n - 1]) / w if n >= w + 1 else 0.0
        g2 = best[n - 1] / n
        return (self.alpha * g1 + (1.0 - self.alpha) * g2) * task.weight

    def next(self, snapshot: Snapshot) -> int | None:
        live = snapshot.live
        if not live:
            return None
        untried = [t for t in live if t.slots == 0]
        if untried:
            return heaviest_first(untried)[0].index
        return self.highest_score(live)

    def highest_score(self, tasks: list[TaskView]) -> int:
        """The index of the task of highest :meth:`score` among ``tasks`` (tried, at least one), ties to the
        earliest declared; one drawn uniformly with the scheduler's generator when all score the same."""
        scores = [self.score(t) for t in tasks]
        if max(scores) == min(scores):
            return tasks[int(self._rng.integers(len(tasks)))].index
        return tasks[int(np.argmax(scores))].index
