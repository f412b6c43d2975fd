"""Piecewise parameterisation of a best-so-far curve (DynaTune, Wang et al., ICLR 2021, s. 4.3)."""

from __future__ import annotations

import numpy as np


def last_segment(y: np.ndarray, jump: float = 0.2) -> int:
    """Where the curve's last segment starts: just after its last step that improves by more than ``jump``.

    A step ``y[i-1] -> y[i]`` is a break when ``y[i] > (1 + jump) * y[i-1]`` (any rise from 0 is one). The
    search space of a task has change points that make its curve jump; one smooth curve fitted across a jump
    fits neither side, so only ``y[start:]`` is fitted.

    >>> last_segment(np.array([0.1, 0.11, 0.2, 0.21, 0.22]))
    2
    """
    y = np.asarray(y, dtype=float)
    breaks = np.flatnonzero(y[1:] > (1.0 + jump) * y[:-1])
    return int(breaks[-1]) + 1 if breaks.size else 0
