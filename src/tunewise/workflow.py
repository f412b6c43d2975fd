"""The end-to-end job behind ``tunewise tune``: import, extract, tune, compile, verify, save.

Every measured trial is on disk (the MetaSchedule database and ``trials.jsonl`` under ``OUTPUT/records``)
before the next slot starts, so a failure at any later step loses no tuning data.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field

from tunewise import compile as compiler
from tunewise import frontend, graph, measure, schedulers, session, tasks, tvm_env, zoo
from tunewise import target as targets
from tunewise.errors import InputError


class Reporter:
    """Receives progress from :func:`tune`; this base ignores everything (a quiet run)."""

    def phase(self, text: str) -> None:
        """A new step started (importing, extracting, tuning, compiling...)."""

    def tuning_started(self, model: tasks.ExtractedModel, budget: session.Budget) -> None:
        """Tasks are extracted and measured; slots follow."""

    def slot(self, event: session.SlotEvent, snapshot) -> None:
        """One slot was measured and recorded."""

    def tuning_finished(self) -> None:
        """The tuning loop ended."""


@dataclass(frozen=True)
class TuneResult:
    """What ``tune`` produced and measured (latencies in seconds)."""

    artifact: str
    model: str
    tasks: int
    trials: int
    failures: int
    tuning_seconds: float
    decision_seconds: float
    untuned_latency: float
    tuned_latency: float
    estimated_latency: float
    max_error: float
    torch_latency: float | None = None
    history: tuple[tuple[float, float], ...] = field(default=())


def torch_latency(model, example_inputs, *, repeat: int = 30) -> float:
    """Median latency of PyTorch eager inference (after warm-up), in seconds."""
    import torch

    with torch.no_grad():
        for _ in range(3):
            model(*example_inputs)
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            model(*example_inputs)
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def tune(source, *, example_inputs=None, input_shapes=None, target=None, scheduler="gradient",
         budget: session.Budget | None = None, trials_per_slot: int = 16, output: str | None = None,
         level: str = "fold-bn", seed: int = 0, measure_config: measure.MeasureConfig | None = None,
         reporter: Reporter | None = None, compare_torch: bool = True) -> TuneResult:
    """Tune ``source`` (zoo name, ``.onnx``/``.pt2`` path, or ``nn.Module`` with ``example_inputs``).

    Writes the verified artifact to ``output`` (default ``tunewise-out/MODEL``) and the records under
    ``output/records``. Raises :class:`~tunewise.errors.TunewiseError` subclasses on bad input.
    """
    from tvm.s_tir import meta_schedule as ms

    reporter = reporter or Reporter()
    budget = budget or session.Budget(max_trials=200)
    scheduler = schedulers.create(scheduler, seed=seed) if isinstance(scheduler, str) else scheduler
    if isinstance(source, str):
        frontend.check_source(source)
    if level not in graph.LEVELS:
        raise InputError(f"unknown graph level {level!r}; choose one of: {', '.join(graph.LEVELS)}")
    tvm_target = targets.resolve(target)
    tvm_env.prepare(tvm_target.kind.name)

    reporter.phase("importing the model")
    imported = frontend.load(source, example_inputs=example_inputs, input_shapes=input_shapes, seed=seed)
    # before any TVM code runs in this process: TVM's runtime threads would compete with torch's
    eager = None
    if compare_torch and not isinstance(source, str):
        eager = torch_latency(source, tuple(example_inputs))
    elif compare_torch and source in zoo.MODELS:
        eager = torch_latency(*zoo.get(source, seed=seed))
    output = output or os.path.join("tunewise-out", imported.name)
    records = os.path.join(output, "records")
    os.makedirs(records, exist_ok=True)

    measurer = measure.Measurer(tvm_target, measure_config)
    try:
        reporter.phase("extracting tasks and measuring their default latency")
        model = tasks.extract(imported, tvm_target, level=level, measurer=measurer)
        database = ms.database.JSONDatabase(work_dir=records)
        reporter.tuning_started(model, budget)
        with open(os.path.join(records, "trials.jsonl"), "a") as log:
            loop = session.Session(model, scheduler, budget, measurer, database, trials_per_slot=trials_per_slot,
                                   seed=seed, trial_log=log, listeners=[reporter.slot])
            final = loop.run()
        reporter.tuning_finished()
    finally:
        measurer.close()

    reporter.phase("compiling the untuned model")
    untuned = compiler.CompiledModel(compiler.build(model), tvm_target)
    untuned_latency = untuned.time(*model.inputs, repeat=3, min_repeat_ms=0).median
    reporter.phase("compiling with the tuned records and checking outputs")
    compiled = compiler.CompiledModel(compiler.build(model, database), tvm_target)
    max_error = compiler.verify(compiled, model.inputs, model.reference_outputs)
    tuned_latency = compiled.time(*model.inputs).median
    failures = sum(t.failures for t in final.tasks)
    compiled.metadata.update(
        model=model.name, graph_level=level, scheduler=type(scheduler).__name__,
        **compiler.io_metadata(model.inputs, model.reference_outputs),
        latency_s=tuned_latency, untuned_latency_s=untuned_latency, torch_eager_latency_s=eager,
        trials=final.trials, failures=failures, tuning_seconds=final.elapsed, max_relative_error=max_error,
    )
    compiled.save(output)
    return TuneResult(output, model.name, len(model.tasks), final.trials, failures, final.elapsed,
                      loop.decision_seconds, untuned_latency, tuned_latency, final.estimated_latency(),
                      max_error, eager, tuple(loop.history))

