"""Fitting a tuning command into its time budget: when tuning must end, and how many trials a slot has time for.

``tunewise tune --time-budget T`` budgets the whole command: importing and extracting come first, tuning gets
what is left minus :func:`compile_estimate` (the steps after tuning), and :class:`SlotPace` shrinks or stops a
slot that would not end in time, from the durations of the slots before it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from tunewise.delivery import timing

# the fresh processes that time the models: the compiled ones' (forked by tunewise.tuning.workers' zygote, loading
# both libraries) took 1.0-1.3 s beyond their rounds on an idle 2-core machine, and 3.5 s with the zygote's
# own start (importing TVM); the references' (importing PyTorch and onnxruntime, exporting a zoo model to ONNX)
# 3-5 s on a busy one
TIMING_PROCESS_SECONDS = 4.0
REFERENCES_PROCESS_SECONDS = 6.0
FIRST_SLOT_SECONDS = 15.0
"""What a run's first searching slot is taken to need before any slot has ended: the evolutionary search's
first batch took 10-25 s for small convolutions on a busy 2-core machine."""


def timing_seconds(latency: float, rounds: int = timing.ROUNDS) -> float:
    """Seconds :mod:`tunewise.delivery.timing` takes to time a model of ``latency`` seconds: a warm-up call and
    ``rounds`` rounds of at least :data:`~tunewise.delivery.timing.ROUND_MS`, a round of shorter calls counted
    twice that long (TVM's evaluator can overshoot it after a short first try).
    """
    return latency + rounds * max(latency, 2 * timing.ROUND_MS / 1e3)


def short_budget_note(budget: float, left: float, *, imported: float, extracted: float, kept: float,
                      measured: int) -> str | None:
    """What to tell the user when a time budget of ``budget`` seconds left ``left`` seconds to tune, after
    ``imported`` seconds of importing and ``extracted`` of extracting and with ``kept`` seconds kept for the
    steps after tuning (:func:`compile_estimate`), and ``measured`` trials were measured in that time; ``None``
    unless it measured nothing because it left less than :data:`FIRST_SLOT_SECONDS`.

    >>> short_budget_note(90, 7.2, imported=7, extracted=21, kept=48, measured=3) is None
    True
    >>> note = short_budget_note(90, 7.2, imported=7, extracted=21, kept=48, measured=0)
    >>> note.startswith("the 90 s time budget left 7 s to tune"), note.endswith("a budget of 3m or more tunes")
    (True, True)
    """
    if measured or left >= FIRST_SLOT_SECONDS:
        return None
    least = imported + extracted + kept + 4 * FIRST_SLOT_SECONDS  # a few slots
    return (f"the {budget:.0f} s time budget left {max(left, 0.0):.0f} s to tune (importing took {imported:.0f} s "
            f"and extracting {extracted:.0f} s, and compiling and timing the result needs about {kept:.0f} s): too "
            f"little for a first slot, so nothing was tuned; a budget of {math.ceil(least / 60)}m or more tunes")


def compile_estimate(build_seconds: float, untuned_latency: float | None, tuned_latency: float, *,
                     references: bool = True, rounds: int = timing.ROUNDS, checked: bool = False) -> float:
    """Seconds the steps after tuning (:func:`tunewise.delivery.finish.finish`) take.

    Counted: a build of the tuned model (``build_seconds``) and two exports, each about half a build; running it
    twice (warm-up and output check); a fresh process (:data:`TIMING_PROCESS_SECONDS`) timing it at
    ``tuned_latency`` (:func:`timing_seconds`, ``rounds`` at most); with ``references``, another
    (:data:`REFERENCES_PROCESS_SECONDS`) timing PyTorch eager and onnxruntime, each counted at the tuned model's
    latency up to a round's :data:`~tunewise.delivery.timing.ROUND_MS`; with ``checked``, the export and timing of
    the fastest checked model; with an ``untuned_latency``, its build, export and timing. A latency that is not
    finite counts as 0. ``build_seconds`` is best what a whole-model check took to compile the tuned model
    (:attr:`tunewise.tuning.model_checks.ModelCheck.build_seconds`), else what optimising and extracting the model took.
    """
    with_untuned = untuned_latency is not None
    untuned = untuned_latency if with_untuned and math.isfinite(untuned_latency) else 0.0
    tuned = tuned_latency if math.isfinite(tuned_latency) else 0.0
    rounds = timing.rounds_for(max(untuned, tuned), rounds)  # the compiled models' rounds
    builds, exports = 1 + with_untuned, 2 + checked + with_untuned
    compiled = (builds * build_seconds + exports * build_seconds / 2 + 2 * tuned + TIMING_PROCESS_SECONDS
                + timing_seconds(tuned, rounds))
    if with_untuned:
        compiled += timing_seconds(untuned, rounds)
    if checked:
        compiled += timing_seconds(tuned, rounds)
    reference = min(tuned, timing.ROUND_MS / 1e3)
    return compiled + (REFERENCES_PROCESS_SECONDS + 2 * timing_seconds(reference) if references else 0.0)


@dataclass
class SlotPace:
    """The durations of a run's recent slots, and what they predict for the next one.

    A slot costs a fixed part (decision, search, recording, cost-model update) and a part per trial (building
    and measuring); the fixed part is kept apart for ``searching`` slots (running the evolutionary search) and
    the others. The prediction is cautious: the largest fixed part of the last ``window`` slots of the same kind,
    plus the mean cost per trial over the last ``window`` slots. Before a slot of a kind has ended, it is
    predicted as a searching one of fixed part ``search_prior`` (:data:`FIRST_SLOT_SECONDS`).

    >>> pace = SlotPace()
    >>> pace.record(searching=False, fixed=4.0, trials=16, measure_seconds=8.0)
    >>> pace.trials_that_fit(20.0, 16, searching=False), pace.trials_that_fit(10.0, 16, searching=False)
    (16, 12)
    >>> pace.trials_that_fit(4.2, 16, searching=False), pace.trials_that_fit(20.0, 16, searching=True)
    (0, 10)
    """

    window: int = 8
    search_prior: float = FIRST_SLOT_SECONDS
    _fixed: dict[bool, list[float]] = field(default_factory=lambda: {True: [], False: []})
    _per_trial: list[float] = field(default_factory=list)

    def record(self, *, searching: bool, fixed: float, trials: int, measure_seconds: float) -> None:
        """One slot ended: ``fixed`` seconds outside building and measuring, ``measure_seconds`` for its
        ``trials`` trials; ``searching`` when it ran the evolutionary search."""
        self._fixed[searching] = [*self._fixed[searching], fixed][-self.window:]
        if trials > 0:
            self._per_trial = [*self._per_trial, measure_seconds / trials][-self.window:]

    def predict(self, trials: int, *, searching: bool) -> float:
        """Seconds a slot of ``trials`` trials is expected to take."""
        if self._fixed[searching]:
            fixed = max(self._fixed[searching])
        elif self._fixed[True]:
            fixed = max(self._fixed[True])
        else:
            fixed = self.search_prior
        per_trial = statistics.fmean(self._per_trial) if self._per_trial else 0.0
        return fixed + trials * per_trial

    def trials_that_fit(self, seconds_left: float, trials: int, *, searching: bool) -> int:
        """The most trials, up to ``trials``, that a slot can take and still end within ``seconds_left``: 0
        when not even one fits (or no time is left)."""
        if seconds_left <= 0:
            return 0
        if self.predict(trials, searching=searching) <= seconds_left:
            return trials
        fixed = self.predict(0, searching=searching)
        per_trial = self.predict(1, searching=searching) - fixed
        if per_trial <= 0:
            return 0
        return max(0, min(trials, math.floor((seconds_left - fixed) / per_trial)))
