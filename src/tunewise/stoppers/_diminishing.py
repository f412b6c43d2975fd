"""Stop once an epoch of tuning improves the model much less than the epoch before it."""

from __future__ import annotations

import math

from tunewise._numbers import is_real
from tunewise.errors import InputError
from tunewise.stoppers._base import StopRule
from tunewise.tuning.state import Cost, Snapshot

_PER = ("seconds", "joules", "trials")


class DiminishingReturns(StopRule):
    """Trimmer's early stop on the rate of model-latency improvement (Borowiec et al., IEEE CLOUD 2022, s. IV-C).

    Per epoch ``t`` with model latency ``f_t`` and cost so far ``O_t`` (in ``per`` units: ``"seconds"``,
    ``"joules"`` or ``"trials"``), ``x_t = (f_t - f_{t-1}) / (O_t - O_{t-1})`` (equation 3), and the run stops
    when ``omega_1 * (x_t - x_{t-1}) / x_{t-1} <= phi`` (equation 2, read as the change of the rate, where the
    paper prints a sum), ``omega_1 = -1`` when ``x_{t-1} > 0``, else 1. After an epoch with no change the run
    stops when ``x_t >= 0``; epochs with a non-finite latency or no cost are not compared.

    Points (:attr:`points`, ``(cost, latency)``) are the driver's measured latencies, at the cost of the first
    check that sees each; while none was measured, the estimate at the first check and after each epoch (as many
    slots as there were live tasks when it began).
    """

    def __init__(self, *, phi: float = -0.25, per: str = "seconds"):
        if not is_real(phi):
            raise ValueError(f"phi must be a finite number, got {phi!r}")
        if per not in _PER:
            raise ValueError(f"per must be one of {', '.join(_PER)}, got {per!r}")
        self.phi = phi
        self.per = per
        self.points: list[tuple[float, float]] = []
        self._measured = 0  # measured latencies taken as points
        self._epoch_end: int | None = None  # the slot at which the estimate is next taken

    def check(self, snapshot: Snapshot, cost: Cost) -> str | None:
        spent = self._spent(cost)
        if snapshot.measured:
            if self._measured == 0:
                self.points = []  # measured latencies replace the estimate from the first one on
            new = snapshot.measured[self._measured:]
            self.points += [(spent, latency) for _, latency in new]
            self._measured = len(snapshot.measured)
            if not new:
                return None
        elif self._epoch_end is None or snapshot.slot >= self._epoch_end:
            self.points.append((spent, snapshot.estimated_latency()))
            self._epoch_end = snapshot.slot + max(1, len(snapshot.live))
        else:
            return None
        return self._verdict()

    def _spent(self, cost: Cost) -> float:
        if self.per == "seconds":
            return cost.seconds
        if self.per == "trials":
            return float(cost.trials)
        if cost.joules is None:
            raise InputError("diminishing returns per joule need the run's energy, and this run is not metered")
        return cost.joules

    def _verdict(self) -> str | None:
        if len(self.points) < 3:
            return None
        (o0, f0), (o1, f1), (o2, f2) = self.points[-3:]
        if not (math.isfinite(f0) and math.isfinite(f1) and math.isfinite(f2)) or o1 <= o0 or o2 <= o1:
            return None
        before, now = (f1 - f0) / (o1 - o0), (f2 - f1) / (o2 - o1)  # equation 3, omega_2 = 1
        unit = self.per.rstrip("s")
        if before == 0:
            if now < 0:
                return None
            return f"diminishing returns: no model-latency improvement in two epochs (phi {self.phi})"
        change = (-1 if before > 0 else 1) * (now - before) / before  # equation 2
        if change > self.phi:
            return None
        return (f"diminishing returns: the model-latency improvement per {unit} changed by {change:+.0%} from the "
                f"epoch before (phi {self.phi})")
