"""The adaptive evaluator: AdaTune's micro-batch measurement run inside MetaSchedule's runner worker."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from tunewise.runners._base import Evaluator
from tunewise.runners._stopping import StoppingRule


@dataclass(frozen=True, kw_only=True)
class Adaptive(Evaluator):
    """Times a candidate in micro-batches until :class:`~tunewise.runners.StoppingRule` says stop.

    Implements AdaTune's adaptive evaluator (Li et al., NeurIPS 2020; see ``_stopping``). One micro-batch is
    one ``rt_mod.time_evaluator(number=b, repeat=1)`` call: one untimed warm-up run, then ``b`` timed runs.
    ``b`` is ``runs`` (AdaTune's 50) capped, by us, so that a micro-batch lasts about ``batch_ms`` at most:
    a probe call of one run measures the candidate first (``batch_ms=0``: no probe, always ``runs``). The
    cap keeps slow CPU candidates from costing ``3 x 50`` runs of several milliseconds each. Micro-batches
    cycle through the runner's argument lists.

    Returns :attr:`~tunewise.runners.Outcome.samples`: one latency per micro-batch, whose mean is the
    trimmed-mean estimate, so a trial's ``len(run_secs)`` is its number of micro-batches. ``reference`` is
    the task's best latency, set by :meth:`with_reference`; a candidate over ``slow_factor`` times it stops
    after ``slow_batches`` micro-batches. Of the runner's ``EvaluatorConfig`` only
    ``enable_cpu_cache_flush`` is used.

    >>> Adaptive().with_reference(2e-3).reference
    0.002
    """

    runs: int = 50
    batch_ms: float = 20.0
    epsilon: float = 0.1
    min_batches: int = 3
    max_batches: int = 10
    trim_after: int = 4
    slow_factor: float = 5.0
    slow_batches: int = 1
    reference: float = math.inf

    def __post_init__(self):
        if self.runs < 1:
            raise ValueError(f"runs must be at least 1, got {self.runs}")
        if not self.batch_ms >= 0:
            raise ValueError(f"batch_ms must be >= 0, got {self.batch_ms}")
        if not self.reference > 0:
            raise ValueError(f"reference latency must be positive, got {self.reference}")
        _ = self.rule  # validates the stopping parameters here rather than in the worker

    @property
    def rule(self) -> StoppingRule:
        return StoppingRule(epsilon=self.epsilon, min_batches=self.min_batches, max_batches=self.max_batches,
                            trim_after=self.trim_after, slow_factor=self.slow_factor,
                            slow_batches=self.slow_batches)

    def with_reference(self, latency: float) -> Adaptive:
        return dataclasses.replace(self, reference=latency)

    def runs_per_batch(self, probe_seconds: float) -> int:
        """``b`` for a candidate whose single run took ``probe_seconds``."""
        if self.batch_ms == 0 or probe_seconds <= 0:
            return self.runs
        return max(1, min(self.runs, int(self.batch_ms * 1e-3 / probe_seconds)))

    def __call__(self, rt_mod, device, evaluator_config, repeated_args) -> list[float]:
        preproc = "cache_flush_cpu_non_first_arg" if evaluator_config.enable_cpu_cache_flush else ""

        def timer(number: int):
            return rt_mod.time_evaluator(rt_mod.entry_name, device, number=number, repeat=1, f_preproc=preproc)

        runs = self.runs
        if self.batch_ms > 0:
            device.sync()
            runs = self.runs_per_batch(timer(1)(*repeated_args[0]).mean)
        micro = timer(runs)

        def micro_batch(i: int) -> float:
            device.sync()
            return micro(*repeated_args[i % len(repeated_args)]).mean

        return list(self.rule.run(micro_batch, self.reference).samples)
