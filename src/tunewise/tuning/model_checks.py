"""The whole model's latency while it is tuned: compiled with the run's best records so far, its outputs
checked against the reference, and timed in a fresh process, as the final artifact is
(:func:`tunewise.delivery.timing.time_side_by_side`), in turn with the model the previous check measured.

Timing the previous model again in the same rounds says how fast the machine runs now against then, since
two models timed in turn move together while one process can run slower than the next. So a check reads its
model's own time unless that is over :data:`SLOW_STRETCH` times the previous check's latency scaled by the two
models' ratio in the same rounds (:func:`reading`), so that the noise of one ratio is not carried from check
to check (evidence: bench/studies/checks/findings.md).

A check costs a compile of the model and a fresh timing process, so it is made every :data:`DEFAULT_EVERY`
seconds of tuning time by default, and sooner once the estimate reaches the run's goal: stop rules
(:mod:`tunewise.stoppers`) then decide from what the model measures, and the estimate shown is brought to the
compiled model (:func:`tunewise.tuning.estimate.calibrated_latency`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tunewise._numbers import is_positive
from tunewise.errors import ImportMismatchError, message_line

if TYPE_CHECKING:
    from tunewise.delivery.compile import CompiledModel

DEFAULT_EVERY = 360.0
"""Seconds of tuning time between two checks, unless the run says otherwise."""

NEVER = "never"
"""No whole-model checks: the estimate stays the tuning loop's own, and the steps after tuning time only the
final records' model."""

SLOW_STRETCH = 1.1
"""How much slower than the previous check's latency scaled by the two models' ratio a check's own time must be
for the check to read the scaled latency instead (:func:`reading`). On a 2-core virtual machine the slow stretches
time a convolutional network 1.15x-1.75x slower (bench/studies/checks/findings.md "The tuned model against onnxruntime,
one process after the other or taking turns"), while two models timed in turn keep their ratio within a few percent."""

EPOCH = "epoch"
"""Check after every epoch instead: as many slots as there were live tasks when the epoch began (one slot per
task: the :class:`~tunewise.schedulers.Survey` and round-robin epoch, Trimmer's check after each)."""


@dataclass(frozen=True)
class Checked:
    """A model a check compiled and measured: its ``latency`` (seconds; see :meth:`ModelCheck.measure`), the
    :class:`~tunewise.delivery.compile.CompiledModel` itself, its outputs' largest relative error, the run's trials
    when it was checked (``None``: not said), the seconds it ``timed`` in its fresh process, and its time over
    the previous check's model in the same rounds (``None``: no previous check)."""

    latency: float
    compiled: CompiledModel
    max_error: float
    trials: int | None = None
    timed: float | None = None
    to_previous: float | None = None


def in_slow_stretch(timed: float, expected: float) -> bool:
    """Whether a model timed ``timed`` seconds where a reading of the machine as it was says ``expected`` was
    timed in a slow stretch: over :data:`SLOW_STRETCH` times ``expected``."""
    return timed > SLOW_STRETCH * expected


def reading(timed: float, previous: float | None = None, to_previous: float | None = None) -> float:
    """The latency (seconds) a check reads from its model's own median time ``timed`` and, where a check came
    before, that check's latency ``previous`` and the median ratio ``to_previous`` of the two models' times in
    the same rounds: ``timed``, unless it is over :data:`SLOW_STRETCH` times ``previous * to_previous`` (the
    check was timed in a slow stretch of the machine), then ``previous * to_previous``."""
    if previous is None or to_previous is None:
        return timed
    scaled = previous * to_previous
    return scaled if in_slow_stretch(timed, scaled) else timed


class ModelCheck:
    """When to measure the whole model, and how (:meth:`measure`).

    A check is due once ``every`` seconds of tuning time have passed since the last one (or the run's start), or
    a quarter of that while the estimate is at or below ``goal`` (seconds), or as the run's time limit draws near
    (time left under twice a check, after tuning worth five checks or more since the last); with ``every``
    :data:`EPOCH`, at the end of every epoch. It is not due when the time left is shorter than the last check
    took (before any check: a tenth of ``every``, or nothing for epochs).

    :attr:`fastest` keeps the fastest model it measured (:class:`Checked`), which the steps after tuning time
    beside the final one; :attr:`latest` the last one, which they take as the final model where no trial followed
    it (:meth:`holding`). :attr:`build_seconds` is what the last check took to compile the model and check its
    outputs (``None`` before one).
    """

    def __init__(self, every: float | str = DEFAULT_EVERY, *, goal: float | None = None):
        if every != EPOCH and not is_positive(every):
            raise ValueError(f"the interval between model checks must be a positive number of seconds or "
                             f"{EPOCH!r}, got {every!r}")
        self.every = every
        self.goal = goal
        self.last = 0.0  # tuning time of the last check
        self.cost = 0.0 if every == EPOCH else every / 10  # seconds the last check took
        self.build_seconds: float | None = None  # seconds the last check here took to compile and verify
        self._epoch_end: int | None = None  # the slot number that ends the epoch in progress
        self.fastest: Checked | None = None
        self.latest: Checked | None = None

    def due(self, snapshot, seconds_left: float = math.inf) -> bool:
        """Whether to check the model now, the run being at ``snapshot`` with ``seconds_left`` of its limits."""
        if seconds_left < self.cost:
            return False
        if self.every == EPOCH:
            if self._epoch_end is not None and snapshot.slot < self._epoch_end:
                return False
            begun = self._epoch_end is not None
            self._epoch_end = snapshot.slot + max(1, len(snapshot.live))
            return begun
        since = snapshot.elapsed - self.last
        near_goal = self.goal is not None and snapshot.estimated_latency() <= self.goal
        closing = seconds_left < 2 * self.cost and since >= 5 * self.cost
        return since >= self.every or (near_goal and since >= self.every / 4) or closing

    def checked(self, elapsed: float, seconds: float) -> None:
        """A check ended at tuning time ``elapsed`` and took ``seconds``."""
        self.last, self.cost = elapsed, seconds

    def fastest_before(self, trials: int) -> Checked | None:
        """The fastest model this check measured before the run reached ``trials`` trials (``None``: none, or
        the fastest holds the records the run ended with)."""
        return self.fastest if self.fastest is not None and self.fastest.trials != trials else None

    def holding(self, trials: int) -> Checked | None:
        """The last model this check measured if it holds the records of a run at ``trials`` trials (checked
        after the last of them), else ``None``."""
        return self.latest if self.latest is not None and self.latest.trials == trials else None

    def measure(self, model, database, *, trials: int | None = None) -> tuple[float, str]:
        """``(latency, "")`` of ``model`` (an :class:`~tunewise.lowering.tasks.ExtractedModel` with its default
        latencies) compiled with the best records of ``database`` that beat them, after ``trials`` trials of
        the run; ``(inf, why)`` when it fails to build, run, or match the reference outputs. Raises
        :class:`~tunewise.errors.ImportMismatchError` when the outputs differ and so do the untuned model's
        (:func:`tunewise.delivery.compile.compile_checked`): no tuning can mend those.

        The model is timed in turn with the previous check's (:attr:`latest`), and its latency is what
        :func:`reading` reads from its own median time and the previous check's latency times the median ratio
        of the two in the same rounds."""
        from tunewise.delivery import compile as compiler
        from tunewise.delivery import timing

        previous = self.latest
        try:
            start = time.perf_counter()
            compiled, max_error = compiler.compile_checked(model, database)
            self.build_seconds = time.perf_counter() - start
            side = timing.time_side_by_side([compiled] + ([previous.compiled] if previous else []), model.inputs)
        except ImportMismatchError:  # no tuning in the time left could mend it
            raise
        except Exception as err:  # a build, run or verification failure of this model: the run goes on
            return math.inf, message_line(err)
        timed, to_previous = side.latencies[0], side.ratio(0, 1) if previous else None
        latency = reading(timed, previous.latency if previous else None, to_previous)
        self.latest = Checked(latency, compiled, max_error, trials, timed, to_previous)
        if self.fastest is None or latency < self.fastest.latency:
            self.fastest = self.latest
        return latency, ""
