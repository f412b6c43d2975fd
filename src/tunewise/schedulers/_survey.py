"""Survey tuning: every task a batch per epoch, until it stops improving."""

from __future__ import annotations

import math

from tunewise._numbers import is_whole
from tunewise.schedulers._round_robin import RoundRobin
from tunewise.tuning.state import TaskView


class Survey(RoundRobin):
    """Trimmer's survey tuning at operator level (Borowiec et al., IEEE CLOUD 2022, s. IV-C).

    Each epoch gives every live task one slot, in :class:`RoundRobin`'s cycle; a task retires after ``patience``
    slots in a row that do not beat its best before them (:meth:`retired`, from the task's view alone; the ledger
    finishes it), and the run ends when every task is retired or finished.

    >>> from tunewise.tuning.state import TaskView
    >>> Survey().retired(TaskView(0, "conv", 1, 1e9, 4e-3, best_history=(3e-3, 2e-3, 2e-3, 2e-3)))
    False
    >>> Survey().retired(TaskView(0, "conv", 1, 1e9, 4e-3, best_history=(3e-3, 2e-3, 2e-3, 2e-3, 2e-3)))
    True
    """

    def __init__(self, *, patience: int = 3):
        if not is_whole(patience) or patience < 1:
            raise ValueError(f"patience must be an integer >= 1, got {patience!r}")
        self.patience = patience

    def retired(self, task: TaskView) -> bool:
        history = task.best_history
        if len(history) < self.patience:
            return False
        before = history[-self.patience - 1] if len(history) > self.patience else math.inf
        return not history[-1] < before
