"""Whether a tuned schedule computes what its task's untuned schedule does, and the tolerance outputs are held to.

MetaSchedule measures how long a candidate takes, never what it computes, and a schedule that TVM compiles into
wrong code measures like any other: the fastest record of a transposed 1-D convolution once wrote garbage on every
CPU target. The compiled model's output check (:func:`tunewise.delivery.compile.verify`) catches such a record;
:func:`first_matching` finds which task's it was, so that the model is compiled with the task's next fastest
record instead (:func:`tunewise.delivery.compile.compile_checked`).
"""

from __future__ import annotations

import logging

import numpy as np

RTOL = 1e-3
"""Relative tolerance of an output element: ``|got - want| <= ATOL * scale + RTOL * |want|``."""
ATOL = 1e-4
"""Absolute tolerance of an output element, as a fraction of the output's largest magnitude (its ``scale``)."""

_log = logging.getLogger(__name__)


def scale(want: np.ndarray) -> float:
    """The largest magnitude of an expected output (1 for an empty one): what :data:`ATOL` is a fraction of."""
    return max(float(np.max(np.abs(want))), 1e-30) if want.size else 1.0


def tolerance(precision: str) -> tuple[float, float]:
    """``(rtol, atol)`` of a model computed in ``precision`` (:mod:`tunewise.lowering.precision`): float32's
    :data:`RTOL` and :data:`ATOL`; bfloat16's relative to the output's scale alone
    (:data:`tunewise.lowering.precision.BFLOAT16_TOLERANCE`)."""
    from tunewise.lowering.precision import BFLOAT16_TOLERANCE, DEFAULT

    return (RTOL, ATOL) if precision == DEFAULT else (0.0, BFLOAT16_TOLERANCE)


def close(got: np.ndarray, want: np.ndarray, *, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """Whether ``got`` has ``want``'s shape, is finite, and every element is within tolerance of ``want``'s."""
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return False
    error = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return not np.any(error > atol * scale(want) + rtol * np.abs(want))


def matches_untuned(model, k: int, record) -> bool:
    """Whether task ``k`` of ``model`` (an :class:`~tunewise.lowering.tasks.ExtractedModel`) scheduled by ``record`` (a
    MetaSchedule tuning record of its workload) computes what its untuned schedule does (:class:`_Untuned`)."""
    return _Untuned(model, k).matches(record)


class _Untuned:
    """Task ``k`` of ``model`` compiled alone with its untuned schedule, run on its device on arguments allocated
    as the runner allocates a candidate's (:func:`tunewise.candidate_runners.alloc_arguments`: floats random,
    masks true, indices zero), and every argument after the call, outputs and all, kept to compare a record's
    kernel with (:meth:`matches`, by :func:`close`)."""

    def __init__(self, model, k: int):
        import tvm

        from tunewise.candidate_runners import alloc_arguments
        from tunewise.lowering import default_schedules
        from tunewise.lowering.tasks import args_info
        from tunewise.target import device_type

        self.mod, self.target = model.task_mods[k], model.target
        self.device = tvm.device(device_type(self.target), 0)
        (allocated,) = alloc_arguments(self.device, [info.as_json() for info in args_info(self.mod)], 1)
        self.args = [a.numpy() for a in allocated]
        self.results = self._run(default_schedules.apply(self.mod, self.target))

    def matches(self, record) -> bool:
        from tvm import s_tir

        schedule = s_tir.Schedule(self.mod)
        record.trace.apply_to_schedule(schedule, remove_postproc=False)
        return all(close(g, w) for g, w in zip(self._run(schedule.mod), self.results, strict=True))

    def _run(self, scheduled) -> list[np.ndarray]:
        import tvm

        kernel = tvm.compile(scheduled, target=self.target)
        arrays = [tvm.runtime.tensor(a, self.device) for a in self.args]
        kernel(*arrays)
        return [a.numpy() for a in arrays]


def first_matching(model, candidates: list[list]) -> tuple[list, list]:
    """Per task of ``model``, the first of its ``candidates[k]`` records (fastest first) that
    :func:`matches_untuned`, ``None`` where none does; and the records passed over, each logged as a warning."""
    chosen, passed_over = [], []
    for k, (task, records) in enumerate(zip(model.tasks, candidates, strict=True)):
        untuned = _Untuned(model, k) if records else None
        found = next((r for r in records if untuned.matches(r)), None)
        skipped = records.index(found) if found is not None else len(records)
        if skipped:
            _log.warning("task %s: %s computed otherwise than its untuned one (TVM compiled %s wrongly); %s is "
                         "used", task.name, "its fastest schedule" if skipped == 1 else f"its {skipped} fastest "
                         "schedules", "it" if skipped == 1 else "them",
                         "the next fastest" if found is not None else "its untuned schedule")
        chosen.append(found)
        passed_over += records[:skipped]
    return chosen, passed_over
