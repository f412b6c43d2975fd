"""The model-latency estimate: one rule, used by the loop, the store's summaries, the reports and the replay.

A compiled model runs each task's best record where it beats the task's default schedule, and the default
elsewhere (:func:`tunewise.delivery.compile.best_records_database` applies only those records), so each call of
a task adds :func:`task_latency` and the model takes :func:`model_latency`, the sum over its tasks weighted by
how often each is called. Latencies in seconds; ``inf`` for a default that failed or a task never measured.

Inside the compiled model the kernels run slower than tuning measures them (weights read from memory, the
glue between them): a whole-model check (:mod:`tunewise.tuning.model_checks`) measures by how much, and
:func:`calibrated_latency` adds the gap it measured to the estimate (evidence: bench/studies/estimate/findings.md).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence


def task_latency(default: float, best: float = math.inf) -> float:
    """What one call of a task adds to the compiled model: its best record's latency where that beats its
    default schedule's, else the default's."""
    return min(default, best)


def model_latency(tasks: Iterable[tuple[int, float, float]]) -> float:
    """The model latency estimate from ``(weight, default latency, best latency)`` per task:
    ``sum(weight * task_latency(default, best))``. With every ``best`` ``inf``, the untuned model's."""
    return sum(weight * task_latency(default, best) for weight, default, best in tasks)


def calibrated_latency(estimate: float, curve: Sequence[tuple[float, float]],
                       measured: Iterable[tuple[float, float]]) -> float:
    """``estimate`` brought to the compiled model: plus the gap between the latest whole-model latency in
    ``measured`` (``(tuning seconds, latency)`` points, in time order; failed checks, ``inf``, are passed over)
    and the estimate that ``curve`` (``(tuning seconds, estimate)`` points, in time order) held when it was
    measured, a gap of at least 0. ``estimate`` itself when nothing was measured, or the estimate then was not
    finite.

    A gap, not a ratio: what the kernels lose inside the model does not shrink as tuning makes them faster
    (evidence: bench/studies/estimate/findings.md).
    """
    checks = [(at, latency) for at, latency in measured if math.isfinite(latency)]
    if not checks or not curve:
        return estimate
    at, latency = checks[-1]
    then = estimate_at(curve, at)
    return estimate + max(0.0, latency - then) if math.isfinite(then) else estimate


def estimate_at(curve: Sequence[tuple[float, float]], at: float) -> float:
    """The estimate ``curve`` (``(tuning seconds, estimate)`` points, in time order, not empty) held at tuning
    time ``at``: its last point at or before ``at`` (its first, before any)."""
    return curve[max(0, bisect.bisect_right([t for t, _ in curve], at) - 1)][1]
