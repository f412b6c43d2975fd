"""The fixed evaluator: MetaSchedule's own, a fixed number of runs per candidate."""

from __future__ import annotations

from dataclasses import dataclass

from tunewise.evaluators._base import Evaluator


@dataclass(frozen=True)
class Fixed(Evaluator):
    """MetaSchedule's default evaluator, unchanged: ``time_evaluator(number, repeat, min_repeat_ms)``.

    Everything comes from the runner's ``EvaluatorConfig`` (:class:`~tunewise.tuning.measure.MeasureConfig`): one
    sample per repeat and per argument list, each the mean of ``number`` runs (more when a repeat would last
    under ``min_repeat_ms``). The task's best latency is not used.

    >>> Fixed().with_reference(1e-3) == Fixed()
    True
    """

    def __call__(self, rt_mod, device, evaluator_config, repeated_args) -> list[float]:
        from tvm.s_tir.meta_schedule.runner.utils import run_evaluator_common

        return run_evaluator_common(rt_mod, device, evaluator_config, repeated_args)
