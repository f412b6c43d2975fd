"""Belief models of how a task's tuning will go on: learning curves, MCMC posteriors, expected improvement.

>>> sorted(FAMILIES)
['log-power', 'loglinear', 'pow2', 'pow4']
"""

from __future__ import annotations

from tunewise.belief._families import FAMILIES, CurveFamily
from tunewise.belief._improvement import expected_improvement
from tunewise.belief._model import CurveModel
from tunewise.belief._segments import last_segment

__all__ = ["FAMILIES", "CurveFamily", "CurveModel", "expected_improvement", "last_segment"]
