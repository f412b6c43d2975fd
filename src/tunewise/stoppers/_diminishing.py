"""Stop once an epoch of tuning improves the model much less than the epoch before it."""

from __future__ import annotations

import math

from tunewise._numbers import is_real
from tunewise.errors import InputError
from tunewise.stoppers._base import StopRule
from tunewise.tuning.state import Cost, Snapshot

_PER = ("seconds", "joules", "trials")


class DiminishingReturns(StopRule):
    """Trimmer's early stop on the rate of model-latency improvement (Borowiec et al., "Trimmer:
    Cost-Efficient Deep Learning Auto-tuning for Cloud Datacenters", IEEE CLOUD 2022, s. IV-C, equations 2
    and 3).

    After each epoch ``t`` the model latency ``f_t`` is taken, and its change per unit of cost over the epoch
    (equation 3)::

        x_t = omega_2 * (f_t - f_{t-1}) / (O_t - O_{t-1})

    where ``O`` is the cost so far, in ``per`` units (``"seconds"`` of tuning time as in the paper, or
    ``"joules"``, or ``"trials"``). ``omega_2`` is -1 when both differences are negative; the cost never
    decreases here, so ``omega_2`` is 1. The run stops when (equation 2)::

        stop = omega_1 * (x_t - x_{t-1}) / x_{t-1} <= phi

    with ``omega_1 = -1`` when ``x_{t-1} > 0`` (the epoch before made the model slower: the paper's cases
    "both ``x_t`` and ``x_{t-1}`` positive" and "``x_t`` faster but ``x_{t-1}`` slower") and 1 otherwise.
    The paper prints the numerator of equation 2 as ``x_t + x_{t-1}``; its text calls the quantity "the
    change in the ratio" compared with the last batch, and with a sum two epochs that both improve the model
    could never stop the run, so the difference is taken. ``stop`` is then the relative change of the
    improvement rate: ``phi = -0.25`` (the paper's value) ends the run once an epoch improves the model at
    least 25 % more slowly per unit of cost than the epoch before it, or makes it slower after one that made
    it faster. When ``x_{t-1} = 0`` (an epoch with no change) the ratio is undefined: the run stops when
    ``x_t >= 0`` too (two epochs without improvement). Epochs with a latency that is not finite, or that cost
    nothing, are not compared.

    Where the points come from: each model latency the driver measured (``snapshot.measured``, one per epoch
    in Trimmer's survey tuning) is a point, at the cost of the first check that sees it. While none was
    measured, the snapshot's estimated model latency is taken at the first check and then at the end of each
    epoch, an epoch being as many slots as there were live tasks when it began (one slot per task: the
    :class:`~tunewise.schedulers.Survey` and round-robin epoch; the same amount of tuning with other
    schedulers). The points are kept in :attr:`points` (``(cost, latency)``, in ``per`` units and seconds).

    >>> from tunewise.tuning.state import Cost, Snapshot
    >>> def measured(*latencies): return Snapshot((), measured=tuple((0.0, f) for f in latencies))
    >>> rule = DiminishingReturns()
    >>> rule.check(measured(10e-3), Cost(seconds=0.0)), rule.check(measured(10e-3, 8e-3), Cost(seconds=60.0))
    (None, None)
    >>> rule.check(measured(10e-3, 8e-3, 7e-3), Cost(seconds=120.0))  # 1 ms in a minute after 2 ms: -50 %
    'diminishing returns: the model-latency improvement per second changed by -50% from the epoch before (phi -0.25)'
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
