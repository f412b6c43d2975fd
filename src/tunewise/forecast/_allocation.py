"""How the remaining slots are expected to be shared among the tasks.

Both rules return ``taken[k, r]``: the slots task ``k`` has had among the first ``r`` future slots
(``r = 0..slots``), never more than its ``caps[k]``.
"""

from __future__ import annotations

import numpy as np


def greedy(gains: list[np.ndarray], slots: int) -> np.ndarray:
    """The scheduler's greedy choice on the expected curves: each slot goes to the task whose next slot
    removes the most expected model latency. ``gains[k][j]`` is the expected latency of task ``k``'s
    contribution after ``j`` more slots (``len(gains[k]) - 1`` is its cap); ties go to the first task."""
    def drops(count: np.ndarray, r: int) -> np.ndarray:
        return np.array([g[c] - g[c + 1] if c + 1 < len(g) else -np.inf for g, c in zip(gains, count, strict=True)])

    return _fill(len(gains), slots, drops)


def recent(shares: np.ndarray, caps: np.ndarray, slots: int) -> np.ndarray:
    """Slots in proportion to ``shares`` (each task's share of the recent slots): each slot goes to the task
    furthest behind its share (largest ``share * r - taken``) among those below their cap, so the share of
    a task at its cap goes to the others."""
    shares = np.asarray(shares, dtype=float)
    return _fill(len(shares), slots, lambda count, r: np.where(count < caps, shares * r - count, -np.inf))


def _fill(tasks: int, slots: int, score) -> np.ndarray:
    """``taken`` for ``slots`` slots, each to the task of the highest ``score(taken so far, r)`` (the first on a
    tie); once every score is ``-inf`` no task takes more."""
    taken = np.zeros((tasks, slots + 1), dtype=int)
    count = np.zeros(tasks, dtype=int)
    for r in range(1, slots + 1):
        scores = score(count, r)
        k = int(np.argmax(scores))
        if scores[k] == -np.inf:
            taken[:, r:] = count[:, None]
            break
        count[k] += 1
        taken[:, r] = count
    return taken
