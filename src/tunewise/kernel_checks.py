"""Whether a tuned schedule computes what its task's untuned schedule does, and the tolerance outputs are held to.

MetaSchedule measures how long a candidate takes, never what it computes, and a schedule that TVM compiles into
wrong code measures like any other: the fastest record of a transposed 1-D convolution once wrote garbage on every
CPU target. The compiled model's output check (:func:`tunewise.compile.verify`) catches such a record;
:func:`first_matching` finds which task's it was, so that the model is compiled with the task's next fastest
record instead (:func:`tunewise.compile.compile_checked`).
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


def close(got: np.ndarray, want: np.ndarray, *, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """Whether ``got`` has ``want``'s shape, is finite, and every element is within tolerance of ``want``'s."""
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return False
    error = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return not np.any(error > atol * scale(want) + rtol * np.abs(want))


def matches_untuned(model, k: int, record, *, seed: int = 0) -> bool:
    """Whether task ``k`` of ``model`` (an :class:`~tunewise.tasks.ExtractedModel`) scheduled by ``record`` (a
    MetaSchedule tuning record of its workload) computes what its untuned schedule does: both are compiled alone
    for the model's target and run on its device on the same seeded arguments (floats standard normal, the others
    zero), and every argument after the call, outputs and all, is compared (:func:`close`)."""
    import tvm
    from tvm import s_tir

    from tunewise import default_schedules
    from tunewise.target import device_type
    from tunewise.tasks import args_info

    mod, target = model.task_mods[k], model.target
    rng = np.random.default_rng(seed)
    args = [_argument(info, rng) for info in args_info(mod)]
    device = tvm.device(device_type(target), 0)

    def run(scheduled) -> list[np.ndarray]:
        kernel = tvm.compile(scheduled, target=target)
        arrays = [tvm.runtime.tensor(a, device) for a in args]
        kernel(*arrays)
        return [a.numpy() for a in arrays]

    schedule = s_tir.Schedule(mod)
    record.trace.apply_to_schedule(schedule, remove_postproc=False)
    want = run(default_schedules.apply(mod, target))
    return all(close(g, w) for g, w in zip(run(schedule.mod), want, strict=True))


def _argument(info, rng: np.random.Generator) -> np.ndarray:
    """An argument of ``info``'s shape and dtype: standard normal for floats, zero for the others."""
    shape, dtype = [int(d) for d in info.shape], str(info.dtype)
    if dtype.startswith(("float", "bfloat")):
        return rng.standard_normal(shape).astype(dtype)
    return np.zeros(shape, dtype)


def first_matching(model, candidates: list[list]) -> tuple[list, list]:
    """Per task of ``model``, the first of its ``candidates[k]`` records (fastest first) that
    :func:`matches_untuned`, ``None`` where none does; and the records passed over, each logged as a warning."""
    chosen, passed_over = [], []
    for k, (task, records) in enumerate(zip(model.tasks, candidates, strict=True)):
        found = next((r for r in records if matches_untuned(model, k, r)), None)
        skipped = records.index(found) if found is not None else len(records)
        if skipped:
            _log.warning("task %s: %s computed otherwise than its untuned one (TVM compiled %s wrongly); %s is "
                         "used", task.name, "its fastest schedule" if skipped == 1 else f"its {skipped} fastest "
                         "schedules", "it" if skipped == 1 else "them",
                         "the next fastest" if found is not None else "its untuned schedule")
        chosen.append(found)
        passed_over += records[:skipped]
    return chosen, passed_over
