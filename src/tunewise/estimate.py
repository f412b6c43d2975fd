"""The model-latency estimate: one rule, used by the loop, the store's summaries, the reports and the replay.

A compiled model runs each task's best record where it beats the task's default schedule, and the default
elsewhere (:func:`tunewise.compile.best_records_database` applies only those records), so each call of a task
adds :func:`task_latency` and the model takes :func:`model_latency`, the sum over its tasks weighted by how
often each is called. Latencies in seconds; ``inf`` for a default that failed or a task never measured.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def task_latency(default: float, best: float = math.inf) -> float:
    """What one call of a task adds to the compiled model: its best record's latency where that beats its
    default schedule's, else the default's."""
    return min(default, best)


def model_latency(tasks: Iterable[tuple[int, float, float]]) -> float:
    """The model latency estimate from ``(weight, default latency, best latency)`` per task:
    ``sum(weight * task_latency(default, best))``. With every ``best`` ``inf``, the untuned model's."""
    return sum(weight * task_latency(default, best) for weight, default, best in tasks)
