"""Stock MetaSchedule as the benchmarks run it: one ``TuneContext`` per task with its defaults (evolutionary
search, post-order-apply), the stock builder changed only by the build function that skips the
tensor-intrinsic import (without it every build times out here), the stock runner, and :func:`tune`, the one stock
tuning loop the benchmarks run."""

from __future__ import annotations

import tempfile

from tunewise import target as targets
from tunewise.tuning.build import build_candidate


def contexts(model, seed: int) -> list:
    """A ``TuneContext`` per task of ``model`` (an :class:`~tunewise.lowering.tasks.ExtractedModel`), seeded from
    ``seed``."""
    from tvm.s_tir import meta_schedule as ms

    return [ms.TuneContext(mod, target=model.target, space_generator="post-order-apply",
                           search_strategy="evolutionary", task_name=t.name, rand_state=seed + i + 1,
                           num_threads=targets.num_cores(model.target)).clone()
            for i, (t, mod) in enumerate(zip(model.tasks, model.task_mods, strict=True))]


def builder():
    from tvm.s_tir import meta_schedule as ms

    return ms.builder.LocalBuilder(f_build=build_candidate)


def runner(config):
    """The stock runner, timing as ``config`` (a :class:`tunewise.tuning.measure.MeasureConfig`) says."""
    from tvm.s_tir import meta_schedule as ms

    return ms.runner.LocalRunner(evaluator_config=config.evaluator())


def database():
    """An empty in-memory MetaSchedule database."""
    from tvm.s_tir import meta_schedule as ms

    return ms.database.MemoryDatabase()


def tune(model, tasks: list, database, builder, runner, *, trials: int = 10**7, on_batch=None) -> None:
    """Stock ``ms.tune_tasks`` over ``tasks`` (:func:`contexts` of ``model``), weighted as ``model``'s: the gradient
    task scheduler, 64 trials a batch, XGBoost and the default measure callbacks, into ``database``, at most
    ``trials`` in all. ``on_batch(task_id, candidates, builder_results, runner_results)`` is called after each
    batch is joined, after the default callbacks have recorded it."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class OnBatch(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            on_batch(task_id, measure_candidates, builder_results, runner_results)

    callbacks = ms.measure_callback.MeasureCallback.create("default")
    if on_batch is not None:
        callbacks = [*callbacks, OnBatch()]
    with tempfile.TemporaryDirectory() as work_dir:
        ms.tune_tasks(tasks=tasks, task_weights=[float(t.weight) for t in model.tasks], work_dir=work_dir,
                      max_trials_global=trials, num_trials_per_iter=64, builder=builder, runner=runner,
                      database=database, cost_model="xgb", measure_callbacks=callbacks, task_scheduler="gradient")


def mean_seconds(result) -> float | None:
    """A runner result's mean run time in seconds; None where the candidate did not run."""
    return sum(float(s) for s in result.run_secs) / len(result.run_secs) if result.run_secs else None
