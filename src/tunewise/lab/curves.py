"""Latency-over-time curves of tuning runs, compared as the benchmarks compare them: when did each run first
come within a margin of the best final latency any of them reached (time to quality)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Curve = Sequence[tuple[float, float]]
"""``(seconds, latency)`` points in time order; a latency of ``inf`` is a point that failed to measure."""


def final(curve: Curve) -> float:
    """The curve's last finite latency (``inf`` when it has none)."""
    return next((latency for _, latency in reversed(curve) if math.isfinite(latency)), math.inf)


def reached(curve: Curve, goal: float) -> float | None:
    """The time of the curve's first point at or under ``goal``, or ``None`` when none is."""
    return next((seconds for seconds, latency in curve if latency <= goal), None)


def time_to_quality(curves: Mapping[str, Curve], within: float = 0.05) -> tuple[float, dict[str, float | None]]:
    """The goal, ``1 + within`` times the best :func:`final` latency of ``curves``, and per curve the time it
    first :func:`reached` the goal."""
    if within < 0:
        raise ValueError(f"the margin must be at least 0, got {within}")
    best = min((final(c) for c in curves.values()), default=math.inf)
    if not math.isfinite(best):
        raise ValueError("no curve has a finite latency")
    goal = (1 + within) * best
    return goal, {name: reached(curve, goal) for name, curve in curves.items()}


def ratio(slower: float | None, faster: float | None) -> float | None:
    """``slower / faster``, the speed-up of reaching a goal in ``faster`` seconds instead of ``slower``;
    ``None`` when either never reached it (or ``faster`` is 0)."""
    if slower is None or faster is None or faster <= 0:
        return None
    return slower / faster
