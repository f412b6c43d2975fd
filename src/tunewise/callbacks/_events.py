"""What a session tells the callbacks about each slot."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class SlotEvent:
    """What one slot did, sent to the callbacks after it is recorded."""

    slot: int
    task: int
    trials: int
    failures: int
    best_before: float
    best_after: float
    seconds: float  # the whole slot: search + measure + record + model update
    search_seconds: float
    measure_seconds: float
    decision_seconds: float
    shared: int = 0  # trials made elsewhere: other tasks, runs or a record base (:mod:`tunewise.sharing`)
    joules: float | None = None  # energy the slot used (None: not metered)
    run_joules: float | None = None  # energy the run has used so far, this slot included
    joules_estimated: bool = False  # the meter estimates rather than measures
    skipped: int = 0  # proposals the candidate filter skipped (:mod:`tunewise.filters`)
