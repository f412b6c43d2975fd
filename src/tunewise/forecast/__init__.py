"""The model-latency forecast: where the estimate will be at the end of the budget, and when it reaches a goal.

:class:`Forecaster` turns a frozen :class:`~tunewise.tuning.state.Snapshot` into a :class:`Forecast` (pure, no TVM,
seeded); the :class:`~tunewise.tuning.ledger.Ledger` makes one after every slot and the snapshot carries it.
"""

from __future__ import annotations

from tunewise.forecast._curves import CurveFit
from tunewise.forecast._forecaster import ALLOCATIONS, GAIN_SCALE, SPREAD, STALL, Forecaster, Futures
from tunewise.forecast._result import END_LEVELS, MAX_UNTRIED_SHARE, MIN_FRACTION, Forecast

__all__ = ["ALLOCATIONS", "END_LEVELS", "GAIN_SCALE", "MAX_UNTRIED_SHARE", "MIN_FRACTION", "SPREAD", "STALL",
           "CurveFit", "Forecast", "Forecaster", "Futures"]
