"""Survey tuning: every task a batch per epoch, until it stops improving."""

from __future__ import annotations

import math

from tunewise._numbers import is_whole
from tunewise.schedulers._round_robin import RoundRobin
from tunewise.tuning.state import TaskView


class Survey(RoundRobin):
    """Trimmer's survey tuning at operator level (Borowiec et al., "Trimmer: Cost-Efficient Deep Learning
    Auto-tuning for Cloud Datacenters", IEEE CLOUD 2022, s. IV-C and fig. 10): the tasks are a queue, and
    each *epoch* gives every live task one batch of measurements (a slot: ``trials_per_slot`` trials);
    a task retires after ``patience`` batches in a row without improvement (3 in the authors' framework),
    and the run ends when every task is retired or finished.

    Epochs are :class:`RoundRobin`'s cycle (the live task with the fewest slots, ties heaviest first), so a
    resumed run first evens the counts out. A retired task is one whose last ``patience`` slots did not beat
    its best before them (a task whose ``patience`` first slots all failed is retired too);
    :meth:`retired` says so from the task's view alone, and the ledger finishes it (the contract of
    :class:`~tunewise.schedulers.TaskScheduler`). The whole-model checks after each epoch are the stop
    rules' (:mod:`tunewise.stoppers`), which work with any scheduler.

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
