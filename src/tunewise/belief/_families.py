"""Parametric learning-curve families for a task's best-so-far throughput.

Each family is an increasing, saturating (or slowly growing) function of the trial index ``x >= 1``, in the
units DynaTune (Wang et al., ICLR 2021) fits: throughput normalised by the hardware peak, so ``0 <= y <= 1``.
The forms follow the learning-curve basis functions of Domhan et al. (IJCAI 2015). The parameter bounds are
the support of the uniform prior and keep every family non-decreasing in ``x``; ``guesses`` gives starting
points for the least-squares fit from the data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CurveFamily:
    """A curve ``fn(x, *params)``; ``bounds`` holds a ``(low, high)`` pair per parameter."""

    name: str
    formula: str
    params: tuple[str, ...]
    bounds: tuple[tuple[float, float], ...]
    fn: Callable[..., np.ndarray]
    guesses: Callable[[np.ndarray, np.ndarray], list[list[float]]]

    def __call__(self, x: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """The curve at ``x`` (shape ``(m,)``) for parameters ``theta``: ``(d,) -> (m,)``, ``(k, d) -> (k, m)``."""
        theta = np.asarray(theta, dtype=float)
        x = np.asarray(x, dtype=float)
        if theta.ndim == 1:
            return self.fn(x, *theta)
        return self.fn(x[None, :], *(theta[:, i, None] for i in range(theta.shape[1])))

    def start(self, x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
        """Starting points for the fit, clipped strictly inside the bounds."""
        low, high = np.array(self.bounds).T
        pad = 1e-6 * (high - low)
        return [np.clip(np.array(g, dtype=float), low + pad, high - pad) for g in self.guesses(x, y)]


def _log_power(x, a, b, c):
    # a / (1 + (x / e^b)^c) = a * exp(-log(1 + e^(c (ln x - b)))), so it never overflows.
    return a * np.exp(-np.logaddexp(0.0, c * (np.log(x) - b)))


def _pow2(x, a, alpha):
    return a * x**alpha


def _pow4(x, c, a, b, alpha):
    return c - (a * x + b) ** -alpha


def _loglinear(x, a, b):
    return a * np.log(x) + b


def _top(y: np.ndarray, factor: float) -> float:
    return min(1.0, max(factor * float(np.max(y)), 1e-3))


LOG_POWER = CurveFamily(
    name="log-power",
    formula="a / (1 + (x / e^b)^c)",
    params=("a", "b", "c"),
    bounds=((1e-6, 1.0), (-5.0, 15.0), (-10.0, 0.0)),
    fn=_log_power,
    guesses=lambda x, y: [
        [_top(y, 1.2), np.log(np.median(x)), -1.0],
        [_top(y, 2.0), np.log(np.max(x)), -0.5],
        [_top(y, 1.05), np.log(np.min(x)), -2.0],
    ],
)

POW2 = CurveFamily(
    name="pow2",
    formula="a * x^alpha",
    params=("a", "alpha"),
    bounds=((1e-6, 1.0), (0.0, 1.0)),
    fn=_pow2,
    guesses=lambda x, y: [[max(float(y[0]) / x[0] ** 0.1, 1e-3), 0.1], [max(float(y[0]), 1e-3), 0.01]],
)

POW4 = CurveFamily(
    name="pow4",
    formula="c - (a * x + b)^-alpha",
    params=("c", "a", "b", "alpha"),
    bounds=((1e-6, 1.0), (1e-6, 10.0), (1e-6, 100.0), (1e-3, 5.0)),
    fn=_pow4,
    guesses=lambda x, y: [[_top(y, 1.2), 1.0 / np.median(x), 1.0, 1.0], [_top(y, 1.05), 1.0, 1.0, 0.5]],
)

LOGLINEAR = CurveFamily(
    name="loglinear",
    formula="a * ln(x) + b",
    params=("a", "b"),
    bounds=((0.0, 1.0), (-1.0, 1.0)),
    fn=_loglinear,
    guesses=lambda x, y: [[1e-3, float(np.mean(y))], [0.05, float(y[0])]],
)

FAMILIES: dict[str, CurveFamily] = {f.name: f for f in (LOG_POWER, POW2, POW4, LOGLINEAR)}
