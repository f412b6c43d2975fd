"""The end-to-end job behind ``tunewise tune``: import, extract, tune, compile, verify, save.

Every measured trial is in the store (a run of its own, with the settings it was started with) before the
next slot starts, so a failure at any later step loses no tuning data, and :func:`resume` continues a run
that was cut short.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from dataclasses import dataclass, field

from tunewise import compile as compiler
from tunewise import cost_models, frontend, graph, measure, runners, schedulers, session, stores, tasks, tvm_env, zoo
from tunewise import target as targets
from tunewise import timing as timings
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
    torch_latency: float | None = None  # PyTorch eager (of the module, zoo model or .pt2 program)
    shared: int = 0  # trials that were schedules transferred between tasks of one anchor (tunewise.sharing)
    history: tuple[tuple[float, float], ...] = field(default=())
    run: int | None = None  # the run's id in the store
    onnxruntime_latency: float | None = None
    timing: str = timings.DESCRIPTION  # how the latencies were timed


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
         level: str = graph.DEFAULT_LEVEL, seed: int = 0, measure_config: measure.MeasureConfig | None = None,
         reporter: Reporter | None = None, compare_torch: bool = True, store=None, evaluator: str = runners.DEFAULT,
         cost_model: str = "xgb", share: bool = True) -> TuneResult:
    """Tune ``source`` (zoo name, ``.onnx``/``.pt2`` path, or ``nn.Module`` with ``example_inputs``).

    ``evaluator`` (:func:`tunewise.runners.create`) times the candidates and ``cost_model``
    (:func:`tunewise.cost_models.create`) ranks them for the search. With ``share``, tasks with the same
    anchor computation start from each other's best schedules (:mod:`tunewise.sharing`).

    Every trial goes to ``store`` (a :class:`~tunewise.stores.Store` or its URL; default
    ``sqlite:///tunewise.db``) as a new run, which :func:`resume` continues if this one is cut short. Writes
    the verified artifact to ``output`` (default ``tunewise-out/MODEL``). Raises
    :class:`~tunewise.errors.TunewiseError` subclasses on bad input.
    """
    if isinstance(source, str) and source not in zoo.MODELS and os.path.isfile(source):
        source = os.path.abspath(source)  # a resumed run may start elsewhere
    settings = {"source": source if isinstance(source, str) else None,
                "scheduler": scheduler if isinstance(scheduler, str) else None,
                "input_shapes": {k: list(v) for k, v in (input_shapes or {}).items()},
                "budget": dataclasses.asdict(budget or session.Budget(max_trials=200)),
                "trials_per_slot": trials_per_slot, "level": level, "seed": seed,
                "evaluator": evaluator, "cost_model": cost_model, "share": share,
                "output": os.path.abspath(output) if output else None,
                "measure": dataclasses.asdict(measure_config or measure.MeasureConfig())}
    return _tune(source, store, None, settings, scheduler, target, example_inputs, reporter, compare_torch)


def resume(run: int, *, store=None, budget: session.Budget | None = None, source=None, example_inputs=None,
           scheduler=None, reporter: Reporter | None = None, compare_torch: bool = True) -> TuneResult:
    """Continue run ``run`` of ``store`` where it stopped (killed, interrupted, failed, or finished and given
    a larger ``budget``), with the settings it was started with: what it measured is kept and counts against
    the budget, and no candidate is measured twice. ``source`` and ``scheduler`` are needed only when the
    run was started with Python objects for them.
    """
    store = stores.create(store, must_exist=True)
    spec = store.get_run(run)
    if spec.status == stores.IMPORTED:
        raise InputError(f"run {run} is an import of records, not a tuning run")
    settings = dict(spec.settings)
    if budget is not None:
        settings["budget"] = dataclasses.asdict(budget)
    source = source if source is not None else settings["source"]
    scheduler = scheduler if scheduler is not None else settings["scheduler"]
    if source is None or scheduler is None:
        raise InputError(f"run {run} was started with a Python model or scheduler object: pass it again")
    return _tune(source, store, run, settings, scheduler, spec.target, example_inputs, reporter, compare_torch)


def _tune(source, store, run: int | None, settings: dict, scheduler, target, example_inputs,
          reporter: Reporter | None, compare_torch: bool) -> TuneResult:
    """The job behind :func:`tune` (``run`` None: a new run) and :func:`resume`; ``store`` may be a URL."""
    reporter = reporter or Reporter()
    budget = session.Budget(**settings["budget"])
    seed, level = settings["seed"], settings["level"]
    scheduler = schedulers.create_seeded(scheduler, seed)
    if isinstance(source, str):
        frontend.check_source(source)
    if level not in graph.LEVELS:
        raise InputError(f"unknown graph level {level!r}; choose one of: {', '.join(graph.LEVELS)}")
    evaluator = runners.create(settings.get("evaluator", "fixed"))
    cost_model_name = settings.get("cost_model", "xgb")
    if cost_model_name not in cost_models.names():
        raise InputError(f"unknown cost model {cost_model_name!r}; choose one of: {', '.join(cost_models.names())}")
    tvm_target = targets.resolve(target)
    store = stores.create(store)
    tvm_env.prepare(tvm_target.kind.name)

    reporter.phase("importing the model")
    input_shapes = {k: tuple(v) for k, v in settings["input_shapes"].items()}
    imported = frontend.load(source, example_inputs=example_inputs, input_shapes=input_shapes, seed=seed)
    output = settings["output"] or os.path.abspath(os.path.join("tunewise-out", imported.name))

    measurer = measure.Measurer(tvm_target, measure.MeasureConfig(**settings["measure"]), evaluator=evaluator)
    try:
        stored = store.get_tasks(run) if run is not None else []
        reporter.phase("extracting tasks" + ("" if stored else " and measuring their default latency"))
        model = tasks.extract(imported, tvm_target, level=level, measurer=None if stored else measurer)
        if len(stored) == len(model.tasks):  # resuming: the default latencies the run was tuned against
            model = model.with_default_latencies(s.default_latency for s in stored)
        if run is None:
            settings["output"] = output
            run = store.create_run(model.name, str(tvm_target), settings["scheduler"] or repr(scheduler), settings)
        loop = session.Session(model, scheduler, budget, measurer, store, run,
                               trials_per_slot=settings["trials_per_slot"], seed=seed, cost_model=cost_model_name,
                               share=settings.get("share", False), listeners=[reporter.slot])
        reporter.phase(f"tuning as run {run} of {store.url}" + (f", resumed after {len(loop.trials)} trials"
                                                                  if loop.trials else ""))
        reporter.tuning_started(model, budget)
        final = loop.run()
        reporter.tuning_finished()
    finally:
        measurer.close()

    reporter.phase("compiling the untuned model")
    untuned = compiler.CompiledModel(compiler.build(model), tvm_target)
    reporter.phase("compiling with the tuned records and checking outputs")
    compiled = compiler.CompiledModel(compiler.build(model, loop.database), tvm_target)
    max_error = compiler.verify(compiled, model.inputs, model.reference_outputs)
    reporter.phase("timing the untuned and tuned models" + (" and the references" if compare_torch else "")
                   + " in fresh processes")
    untuned_latency, tuned_latency = timings.time_compiled(untuned, compiled, model.inputs)
    eager, onnxruntime = (timings.time_references(source, model.inputs, example_inputs=example_inputs, seed=seed)
                          if compare_torch else (None, None))
    failures = sum(t.failures for t in final.tasks)
    compiled.metadata.update(
        model=model.name, graph_level=level, scheduler=type(scheduler).__name__, run=run,
        **compiler.io_metadata(model.inputs, model.reference_outputs, model.mod),
        latency_s=tuned_latency, untuned_latency_s=untuned_latency, torch_eager_latency_s=eager,
        onnxruntime_latency_s=onnxruntime, timing=timings.DESCRIPTION,
        trials=final.trials, failures=failures, tuning_seconds=final.elapsed, max_relative_error=max_error,
        evaluator=settings.get("evaluator", "fixed"), cost_model=cost_model_name, shared_trials=loop.shared,
        latency_estimate_history=[list(point) for point in loop.history],
    )
    compiled.save(output)
    with open(os.path.join(output, compiler.METADATA)) as f:
        store.add_artifact(run, output, json.load(f))
    store.set_status(run, stores.FINISHED)
    return TuneResult(output, model.name, len(model.tasks), final.trials, failures, final.elapsed,
                      loop.decision_seconds, untuned_latency, tuned_latency, final.estimated_latency(),
                      max_error, eager, loop.shared, tuple(loop.history), run, onnxruntime)
