"""What a forecast says: the model-latency estimate's distribution at future tuning times."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tunewise import infinity

#: The probability levels of :attr:`Forecast.end`: 0, 5 %, ..., 100 %.
END_LEVELS = tuple(i / 20 for i in range(21))

#: A forecast is shown (and acted on) once this fraction of the run's budget is spent and the tasks without a
#: valid measurement hold at most :data:`MAX_UNTRIED_SHARE` of the estimate: the display gate, chosen with the
#: forecaster's spread by ``bench/studies/forecast/forecast.py``, which reports how the forecasts it shows hold.
MIN_FRACTION = 0.5

#: The most of the estimate that tasks without a valid measurement may hold in a calibrated forecast: their
#: futures are borrowed from other tasks' curves, and a scheduler may leave a layout operator worth microseconds
#: untried all run long.
MAX_UNTRIED_SHARE = 0.05


@dataclass(frozen=True)
class Forecast:
    """The distribution of the model-latency estimate (seconds) from now to the end of the budget, made after
    slot ``slot`` at ``elapsed`` seconds of tuning.

    ``times`` run from ``elapsed`` to the forecast end of the budget; ``low``, ``median`` and ``high`` are the
    10 %, 50 % and 90 % quantiles of the estimate at each (non-increasing), ``end`` its quantiles at the budget's
    end at :data:`END_LEVELS`. ``untried`` counts the tasks without a valid measurement, ``untried_share`` the
    fraction of the estimate they hold. ``goal`` is the run's latency goal (seconds) if any. ``gap`` is ``None``
    while no whole-model check measured the model; after one, the forecast is of the compiled model and ``gap``
    is what it adds to the estimate (:func:`tunewise.tuning.estimate.calibrated_latency`).

    >>> f = Forecast(3, 30.0, (30.0, 60.0, 90.0), (9e-3, 7e-3, 6.2e-3), (9e-3, 8e-3, 7e-3), (9e-3, 9e-3, 7.8e-3),
    ...              tuple(6e-3 + 2e-3 * q for q in END_LEVELS))
    >>> f.time_to(8e-3)
    (60.0, 60.0, 90.0)
    """

    slot: int
    elapsed: float
    times: tuple[float, ...]
    low: tuple[float, ...]
    median: tuple[float, ...]
    high: tuple[float, ...]
    end: tuple[float, ...]
    untried: int = 0
    goal: float | None = None
    untried_share: float = 0.0
    gap: float | None = None

    @property
    def budget_end(self) -> float:
        """The tuning time at which the budget is forecast to end."""
        return self.times[-1]

    @property
    def fraction(self) -> float:
        """The fraction of the budget spent when the forecast was made."""
        return self.elapsed / self.budget_end if self.budget_end > 0 else 1.0

    @property
    def calibrated(self) -> bool:
        """Whether the forecast is made where it is calibrated (evidence: bench/studies/forecast/findings.md): at
        least :data:`MIN_FRACTION` of the budget spent, and at most :data:`MAX_UNTRIED_SHARE` of the estimate held
        by tasks without a valid measurement.
        """
        return self.fraction >= MIN_FRACTION and self.untried_share <= MAX_UNTRIED_SHARE

    def at_end(self) -> tuple[float, float, float]:
        """``(low, median, high)``: the 80 % interval and the median of the estimate at the budget's end."""
        return self.low[-1], self.median[-1], self.high[-1]

    def at(self, time: float) -> tuple[float, float, float]:
        """``(low, median, high)`` at tuning time ``time`` (the last point at or before it)."""
        i = max(int(np.searchsorted(self.times, time, side="right")) - 1, 0)
        return self.low[i], self.median[i], self.high[i]

    def probability_reached(self, latency: float) -> float:
        """The probability that the estimate is at most ``latency`` by the end of the budget."""
        return float(np.interp(latency, self.end, END_LEVELS, left=0.0, right=1.0))

    def time_to(self, latency: float) -> tuple[float, float, float]:
        """``(early, median, late)``: the 10 %, 50 % and 90 % quantiles of the tuning time at which the estimate
        reaches ``latency`` (``inf``: not within the budget), read from the band since every future is non-increasing.
        """
        return tuple(_first(self.times, band, latency) for band in (self.low, self.median, self.high))

    def summary(self) -> str:
        """``"~9.8 ms at budget end (80 %: 9.1-10.9)"``; ``"~9.8 ms in the model at budget end (...)"`` once a
        check measured the model (:attr:`gap`)."""
        low, median, high = (x * 1e3 for x in self.at_end())
        where = "" if self.gap is None else " in the model"
        return f"~{median:.3g} ms{where} at budget end (80 %: {low:.3g}-{high:.3g})"

    def goal_summary(self, clock=None) -> str | None:
        """The forecast time to reach the goal, ``"goal 8 ms in ~4m10s (80 %: 2m30s-never)"`` (``None``
        without a goal). ``clock`` formats seconds from now (default: ``"123s"``)."""
        if self.goal is None:
            return None
        clock = clock or (lambda s: f"{s:.0f}s")
        early, median, late = (t - self.elapsed for t in self.time_to(self.goal))

        def when(seconds: float) -> str:
            return clock(seconds) if math.isfinite(seconds) else "never"

        return f"goal {self.goal * 1e3:.4g} ms in ~{when(median)} (80 %: {when(early)}-{when(late)})"

    def line(self, clock=None) -> str:
        """:meth:`summary`, then ``"; "`` and :meth:`goal_summary` (``clock``) when the forecast has a goal: what
        the live display and ``tunewise show`` print."""
        goal = self.goal_summary(clock)
        return self.summary() + (f"; {goal}" if goal else "")

    def to_json(self) -> dict:
        """The forecast as a JSON object (what the store keeps); :meth:`from_json` reads it back."""
        return {"slot": self.slot, "elapsed": self.elapsed, "times": list(self.times), "low": list(self.low),
                "median": list(self.median), "high": list(self.high), "end": list(self.end),
                "untried": self.untried, "goal": self.goal,
                "untried_share": infinity.to_json(self.untried_share), "gap": self.gap}

    @classmethod
    def from_json(cls, data: dict) -> Forecast:
        # a forecast stored without its untried share: none when every task was measured, else unknown
        share = data.get("untried_share", 0.0 if data["untried"] == 0 else None)
        return cls(data["slot"], data["elapsed"], *(tuple(data[k]) for k in ("times", "low", "median", "high", "end")),
                   data["untried"], data["goal"], infinity.from_json(share), data.get("gap"))


def _first(times, band, latency: float) -> float:
    reached = np.flatnonzero(np.asarray(band) <= latency)
    return float(times[reached[0]]) if reached.size else math.inf
