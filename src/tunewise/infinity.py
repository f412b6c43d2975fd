"""Infinity in JSON, which has no number for it: written as null, read back as ``math.inf``. Latencies are
infinite where nothing valid was measured, and every file and store column that holds them says so this way."""

from __future__ import annotations

import math


def to_json(value: float) -> float | None:
    """``value``, or None where it is not finite."""
    return value if math.isfinite(value) else None


def from_json(value: float | None) -> float:
    """What :func:`to_json` wrote: ``value`` as a float, infinity for None."""
    return math.inf if value is None else float(value)
