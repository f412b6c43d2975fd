"""The adaptive evaluator: AdaTune's micro-batch measurement run inside MetaSchedule's runner worker."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from tunewise.evaluators._base import Evaluator
from tunewise.evaluators._stopping import StoppingRule

COLD_PREPROC = "cache_flush_cpu_non_first_arg"  # TVM's flush of every argument but the first (the input)


@dataclass(frozen=True, kw_only=True)
class Adaptive(Evaluator):
    """Times a candidate in micro-batches until :class:`~tunewise.evaluators.StoppingRule` says stop.

    AdaTune's adaptive evaluator (Li et al., NeurIPS 2020). A micro-batch is ``b`` timed runs: ``runs`` capped so
    that it lasts about ``batch_ms`` at most, as a probe of one run measures (``batch_ms=0``: no probe, always
    ``runs``). Since every ``time_evaluator`` call begins with an untimed warm-up run, calls are few: when ``b``
    is 1 the probe is the first micro-batch, the micro-batches up to ``min_batches`` come from one call, and each
    later one from its own; calls cycle through the runner's argument lists.

    Returns :attr:`~tunewise.evaluators.Outcome.samples`, one latency per micro-batch, whose mean is the
    trimmed-mean estimate. ``reference`` is the task's best latency (:meth:`with_reference`); a candidate over
    ``slow_factor`` times it stops after ``slow_batches`` micro-batches. Of the runner's ``EvaluatorConfig`` only
    ``enable_cpu_cache_flush`` is used: every run is then timed cold, on its own, after TVM flushes every argument
    but the input from the CPU caches, as a kernel runs in a model whose weights leave the last-level cache.
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
        cold = evaluator_config.enable_cpu_cache_flush

        def timer(runs: int, batches: int, args) -> list[float]:
            # ``batches`` micro-batches of ``runs`` runs each from one call; cold, every run is a repeat of
            # its own (TVM flushes before each repeat) and a micro-batch the mean of its runs
            number, repeat = (1, runs * batches) if cold else (runs, batches)
            results = rt_mod.time_evaluator(rt_mod.entry_name, device, number=number, repeat=repeat,
                                            f_preproc=COLD_PREPROC if cold else "")(*args).results
            if not cold:
                return list(results)
            return [sum(results[i * runs:(i + 1) * runs]) / runs for i in range(batches)]

        runs, pending = self.runs, []
        if self.batch_ms > 0:
            device.sync()
            probe = timer(1, 1, repeated_args[0])[0]
            runs = self.runs_per_batch(probe)
            if runs == 1:  # the probe was a micro-batch of one run: a slow candidate may stop right here
                pending.append(probe)

        def micro_batch(i: int) -> float:
            # every time_evaluator call starts with an untimed warm-up run, so the micro-batches the rule
            # needs anyway come from one call, and later ones one call each
            if not pending:
                device.sync()
                pending.extend(timer(runs, max(1, self.min_batches - i), repeated_args[i % len(repeated_args)]))
            return pending.pop(0)

        return list(self.rule.run(micro_batch, self.reference).samples)
