"""Stock MetaSchedule as the benchmarks run it: one ``TuneContext`` per task with its defaults (evolutionary
search, post-order-apply), the stock builder changed only by the build function that skips the
tensor-intrinsic import (without it every build times out here), the stock runner."""

from __future__ import annotations

from tunewise import target as targets
from tunewise import tvm_env


def contexts(model, seed: int) -> list:
    """A ``TuneContext`` per task of ``model`` (an :class:`~tunewise.tasks.ExtractedModel`), seeded from ``seed``."""
    from tvm.s_tir import meta_schedule as ms

    return [ms.TuneContext(mod, target=model.target, space_generator="post-order-apply",
                           search_strategy="evolutionary", task_name=t.name, rand_state=seed + i + 1,
                           num_threads=targets.num_cores(model.target)).clone()
            for i, (t, mod) in enumerate(zip(model.tasks, model.task_mods, strict=True))]


def builder():
    from tvm.s_tir import meta_schedule as ms

    return ms.builder.LocalBuilder(f_build=tvm_env.build_candidate)


def runner(config):
    """The stock runner, timing as ``config`` (a :class:`tunewise.measure.MeasureConfig`) says."""
    from tvm.s_tir import meta_schedule as ms

    return ms.runner.LocalRunner(evaluator_config=config.evaluator())
