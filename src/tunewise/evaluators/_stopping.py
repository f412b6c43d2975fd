"""AdaTune's stopping rule for measuring one candidate in micro-batches: plain numpy, no TVM.

AdaTune (Li et al., NeurIPS 2020; ``papers/adatune-review-answers.txt`` and the authors' code) replaces a
fixed number of repeats by micro-batches of ``b`` runs: after each micro-batch it computes the throughput
``p_i = 1 / t_i`` of every micro-batch so far, drops the smallest and the largest once there are more than
four, and stops as soon as at least three micro-batches ran and the coefficient of variation
``std(p) / mean(p)`` is under ``epsilon`` (0.1); otherwise it goes on up to a maximum. The estimate is the
trimmed mean of the micro-batch latencies (what the authors' code returns). Stable candidates cost the
minimum; noisy ones get more runs.

Added here: a candidate that is already clearly slower than the task's best (its fastest micro-batch is
over ``slow_factor`` times the task's best latency) stops after ``slow_batches`` micro-batches, since a few
runs are enough to know it will not be chosen.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

STABLE, SLOW, LIMIT = "stable", "slow", "limit"


@dataclass(frozen=True)
class Outcome:
    """How the measurement of one candidate ended.

    ``samples`` has one entry per micro-batch that ran (its mean latency, seconds), except that the two
    micro-batches the trimming drops are replaced by the estimate, so ``mean(samples) == estimate`` and
    ``len(samples)`` is the number of micro-batches. ``reason`` is ``"stable"``, ``"slow"`` or ``"limit"``.
    """

    samples: tuple[float, ...]
    estimate: float
    variation: float
    reason: str


@dataclass(frozen=True)
class StoppingRule:
    """When to stop measuring a candidate, given the latencies of its micro-batches so far.

    >>> rule = StoppingRule()
    >>> rule.run(lambda i: 1e-3).samples  # a perfectly stable candidate stops at the minimum
    (0.001, 0.001, 0.001)
    >>> rule.run(lambda i: 1e-2, reference=1e-3).reason  # 10x slower than the task's best
    'slow'
    """

    epsilon: float = 0.1
    min_batches: int = 3
    max_batches: int = 10
    trim_after: int = 4  # drop the min and max once there are more micro-batches than this
    slow_factor: float = 5.0
    slow_batches: int = 1

    def __post_init__(self):
        if not self.epsilon > 0:
            raise ValueError(f"epsilon must be positive, got {self.epsilon}")
        if not 1 <= self.min_batches <= self.max_batches:
            raise ValueError(f"need 1 <= min_batches <= max_batches, got {self.min_batches}, {self.max_batches}")
        if self.trim_after < 2:
            raise ValueError(f"trim_after must be at least 2, got {self.trim_after}")
        if not self.slow_factor > 1:
            raise ValueError(f"slow_factor must be over 1, got {self.slow_factor}")
        if not 1 <= self.slow_batches <= self.max_batches:
            raise ValueError(f"need 1 <= slow_batches <= max_batches, got {self.slow_batches}")

    def kept(self, latencies) -> np.ndarray:
        """The micro-batch latencies the statistics use: all of them, or all but the min and max."""
        t = np.sort(np.asarray(latencies, dtype=float))
        return t[1:-1] if len(t) > self.trim_after else t

    def variation(self, latencies) -> float:
        """Coefficient of variation of the kept micro-batches' throughputs (``inf`` on a zero timing)."""
        t = self.kept(latencies)
        if np.any(t <= 0):
            return math.inf
        p = 1.0 / t
        return float(np.std(p) / np.mean(p))

    def decide(self, latencies, reference: float = math.inf) -> str | None:
        """Why to stop after these micro-batches (``"stable"``, ``"slow"``, ``"limit"``), or ``None`` to go on.

        ``reference`` is the task's best latency so far (``inf``: none yet, never stop as slow).
        """
        n = len(latencies)
        if n >= self.min_batches and self.variation(latencies) < self.epsilon:
            return STABLE
        if n >= self.slow_batches and min(latencies) > self.slow_factor * reference:
            return SLOW
        if n >= self.max_batches:
            return LIMIT
        return None

    def outcome(self, latencies, reason: str) -> Outcome:
        """The result of measuring with these micro-batch latencies (see :class:`Outcome`)."""
        t = [float(x) for x in latencies]
        estimate = float(np.mean(self.kept(t)))
        if len(t) > self.trim_after:
            for extreme in (min(t), max(t)):
                t[t.index(extreme)] = estimate
        return Outcome(tuple(t), estimate, self.variation(latencies), reason)

    def run(self, micro_batch: Callable[[int], float], reference: float = math.inf) -> Outcome:
        """Measure: call ``micro_batch(i)`` (the mean latency of the ``i``-th micro-batch) until the rule stops."""
        latencies: list[float] = []
        while True:
            latencies.append(float(micro_batch(len(latencies))))
            reason = self.decide(latencies, reference)
            if reason is not None:
                return self.outcome(latencies, reason)
