"""The prior every scheduler shares before a task is tuned: the share of the model latency it holds untuned.

A task's untuned share is ``weight * default_latency`` over the model-latency estimate
(:meth:`~tunewise.tuning.state.Snapshot.estimated_latency`); a task whose untuned schedule failed counts as
holding all of it. Schedulers that give untried tasks a first pass, and ``sequential``, take them in
:func:`heaviest_first` order (evidence: bench/studies/schedulers/findings.md); before the default
latencies are measured, a new run tunes the :func:`heaviest_by_flops` task first.

>>> from tunewise.tuning.state import Snapshot, TaskView
>>> tasks = (TaskView(0, "reshape", 1, 1e3, 1e-6), TaskView(1, "conv", 2, 1e9, 1e-3))
>>> [t.index for t in heaviest_first(tasks)]
[1, 0]
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from tunewise.tuning.state import Snapshot, TaskView


def untuned_weight(task: TaskView) -> float:
    """``weight * default_latency``: the seconds the task adds to the model untuned (``inf`` when its untuned
    schedule failed)."""
    return task.weight * task.default_latency if math.isfinite(task.default_latency) else math.inf


def untuned_share(task: TaskView, snapshot: Snapshot) -> float:
    """The fraction of the model-latency estimate ``task`` holds untuned; 1 when its untuned schedule failed
    or the estimate is not positive (0 for the others when another task's failure makes the estimate
    ``inf``)."""
    total = snapshot.estimated_latency()
    held = untuned_weight(task)
    return held / total if math.isfinite(held) and total > 0 else 1.0


def heaviest_first(tasks: Iterable[TaskView]) -> list[TaskView]:
    """``tasks`` by decreasing :func:`untuned_weight` (failed untuned schedules first), ties in declaration
    order."""
    return sorted(tasks, key=lambda t: (-untuned_weight(t), t.index))


def heaviest_by_flops(tasks: Iterable[TaskView]) -> TaskView:
    """The task of largest ``weight * flops`` (ties: the first declared): where the time most likely goes when
    no default latency is known yet."""
    return min(tasks, key=lambda t: (-t.weight * t.flops, t.index))
