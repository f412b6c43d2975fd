"""Stop once the forecast says the latency goal is out of reach within the budget."""

from __future__ import annotations

from tunewise._numbers import is_number
from tunewise.stoppers._base import StopRule, milliseconds, positive
from tunewise.tuning.state import Cost, Snapshot


class GiveUp(StopRule):
    """End the run once its forecast (:attr:`~tunewise.tuning.state.Snapshot.forecast`, :mod:`tunewise.forecast`)
    says the model-latency estimate will not reach ``latency`` seconds by the end of the budget with
    probability at least ``probability``.

    Only a :attr:`~tunewise.forecast.Forecast.calibrated` forecast counts; without one the run goes on. The
    reason gives the forecast latency at the budget's end.

    >>> from tunewise.forecast import END_LEVELS, Forecast
    >>> from tunewise.tuning.state import Cost, Snapshot
    >>> forecast = Forecast(9, 60.0, (60.0, 120.0), (11e-3, 9e-3), (11e-3, 10e-3), (11e-3, 11e-3),
    ...                     tuple(8.5e-3 + 3e-3 * q for q in END_LEVELS))
    >>> GiveUp(latency=8e-3, probability=0.9).check(Snapshot((), forecast=forecast), Cost())
    'giving up on latency goal 8 ms: missed within the budget with probability 100%; ~10 ms at budget end (80 %: 9-11)'
    """

    def __init__(self, *, latency: float, probability: float):
        positive("latency", latency)
        if not is_number(probability) or not 0 < probability <= 1:
            raise ValueError(f"probability must be a number in (0, 1], got {probability!r}")
        self.latency = latency
        self.probability = probability

    def check(self, snapshot: Snapshot, cost: Cost) -> str | None:
        forecast = snapshot.forecast
        if forecast is None or not forecast.calibrated:
            return None
        miss = 1.0 - forecast.probability_reached(self.latency)
        if miss < self.probability:
            return None
        return (f"giving up on latency goal {milliseconds(self.latency)}: missed within the budget with probability "
                f"{miss:.0%}; {forecast.summary()}")
