"""The end-to-end job behind ``tunewise tune``: import, extract, tune, compile, verify, save.

Every measured trial is in the store (a run of its own, with the settings it was started with) before the
next slot starts, so a failure at any later step loses no tuning data, and :func:`resume` continues a run
that was cut short. A job owns its run (:mod:`tunewise.lease`) from its creation or its resumption to its
end, and stops cleanly on a stop request (:mod:`tunewise.interrupts`) between its steps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from tunewise import compile as compiler
from tunewise import cost_models, frontend, graph, measure, runners, schedulers, session, stores, tasks, tvm_env, zoo
from tunewise import target as targets
from tunewise import timing as timings
from tunewise.destinations import check_folder
from tunewise.errors import InputError, StoreError
from tunewise.interrupts import Interrupted, raise_if_stopped
from tunewise.lease import Lease
from tunewise.timebudget import compile_estimate


class Reporter:
    """Receives progress from :func:`tune`; this base ignores everything (a quiet run)."""

    def phase(self, text: str) -> None:
        """A new step started (importing, extracting, tuning, compiling...)."""

    def tuning_started(self, model: tasks.ExtractedModel, budget: session.Budget) -> None:
        """Tasks are extracted and measured; slots follow."""

    def slot_phase(self, snapshot, task: int, phase: str) -> None:
        """The slot in flight, of task ``task``, entered ``phase`` (``search``, ``build``, ``measure``);
        ``snapshot`` is the run before it."""

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
    phase_seconds: dict[str, float] = field(default_factory=dict)  # wall time of import, extract, tune, compile
    onnxruntime_latency: float | None = None
    timing: str = timings.describe()  # how the latencies were timed


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


def tune(source, *, example_inputs=None, input_shapes=None, target=None, scheduler=schedulers.DEFAULT,
         budget: session.Budget | None = None, trials_per_slot: int = 16, output: str | None = None,
         level: str = graph.DEFAULT_LEVEL, seed: int = 0, measure_config: measure.MeasureConfig | None = None,
         reporter: Reporter | None = None, compare_torch: bool = True, store=None, evaluator: str = runners.DEFAULT,
         cost_model: str = "xgb", share: bool = True, progress: bool | None = None) -> TuneResult:
    """Tune ``source`` (zoo name, ``.onnx``/``.pt2`` path, or ``nn.Module`` with ``example_inputs``).

    ``progress`` shows the run as ``tunewise tune`` does (:class:`tunewise.progress.LiveProgress`); by default
    it is on when standard output is a terminal or a notebook. A ``reporter`` given replaces it.

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
    if budget is not None and not budget.bounded:
        raise InputError("set a budget: trials, time or trials per task")
    settings = {"source": source if isinstance(source, str) else None,
                "scheduler": scheduler if isinstance(scheduler, str) else None,
                "input_shapes": {k: list(v) for k, v in (input_shapes or {}).items()},
                "budget": dataclasses.asdict(budget or session.Budget(max_trials=200)),
                "trials_per_slot": trials_per_slot, "level": level, "seed": seed,
                "evaluator": evaluator, "cost_model": cost_model, "share": share,
                "output": os.path.abspath(output) if output else None,
                "measure": dataclasses.asdict(measure_config or measure.MeasureConfig())}
    with _ownership() as owned:
        return _tune(source, store, None, settings, scheduler, target, example_inputs, _reporter(reporter, progress),
                     compare_torch, owned)


def _reporter(reporter: Reporter | None, progress: bool | None) -> Reporter:
    """``reporter``, else the live display when ``progress`` (``None``: stdout is a terminal or a notebook),
    else a quiet one."""
    if reporter is not None:
        return reporter
    from rich.console import Console

    from tunewise.progress import LiveProgress

    if progress is None:
        console = Console()
        progress = console.is_terminal or console.is_jupyter
    return LiveProgress() if progress else Reporter()


def resume(run: int, *, store=None, budget: session.Budget | Mapping | None = None, source=None,
           example_inputs=None, scheduler=None, reporter: Reporter | None = None,
           compare_torch: bool = True, output: str | None = None, progress: bool | None = None) -> TuneResult:
    """Continue run ``run`` of ``store`` where it stopped (killed, interrupted, failed, or finished and given
    a larger ``budget``), with the settings it was started with: what it measured is kept and counts against
    the budget, and no candidate is measured twice. ``source`` and ``scheduler`` are needed only when the
    run was started with Python objects for them.

    ``budget`` (a :class:`~tunewise.session.Budget`, or a mapping of some of its fields) replaces the limits
    it sets and keeps the run's other limits; the budget so made is stored in the run's settings. ``output``
    replaces the run's artifact folder, in the store too. ``progress`` is :func:`tune`'s.
    Raises :class:`~tunewise.errors.RunBusyError` when another live process owns the run.
    """
    store = stores.create(store, must_exist=True)
    spec = store.get_run(run)
    if spec.status == stores.IMPORTED:
        raise InputError(f"run {run} is an import of records, not a tuning run")
    settings = dict(spec.settings)
    if budget is not None:
        settings["budget"] = _replaced_limits(settings["budget"], budget)
    source = source if source is not None else settings["source"]
    scheduler = scheduler if scheduler is not None else settings["scheduler"]
    if source is None or scheduler is None:
        raise InputError(f"run {run} was started with a Python model or scheduler object: pass it again")
    if output is not None:
        settings["output"] = check_folder(output, "artifact folder")
    with _ownership() as owned:
        owned.claim(store, run)
        if settings != spec.settings:
            store.update_settings(run, settings)
        return _tune(source, store, run, settings, scheduler, spec.target, example_inputs,
                     _reporter(reporter, progress), compare_torch, owned)


def _replaced_limits(limits: Mapping, budget: session.Budget | Mapping) -> dict:
    """The budget ``limits`` (a dict of :class:`~tunewise.session.Budget`) with the limits ``budget`` sets."""
    changes = dataclasses.asdict(budget) if isinstance(budget, session.Budget) else dict(budget)
    unknown = set(changes) - {f.name for f in dataclasses.fields(session.Budget)}
    if unknown:
        raise InputError(f"unknown budget limits: {', '.join(sorted(unknown))}")
    return dataclasses.asdict(session.Budget(**{**limits, **{k: v for k, v in changes.items() if v is not None}}))


def resume_command(run: int, store_url: str | None) -> str:
    """The command line that resumes run ``run`` of the store at ``store_url`` (its password hidden)."""
    store = "" if store_url in (None, stores.DEFAULT_URL) else f" --store {stores.display_url(store_url)}"
    return f"tunewise tune --resume {run}{store}"


@contextlib.contextmanager
def _ownership():
    """A :class:`~tunewise.lease.Lease` for a job; a stop (Ctrl-C) that ends the job is raised as
    :class:`~tunewise.interrupts.Interrupted` naming the run the lease holds, left ``interrupted``; a store
    that fails while the job holds a run raises :class:`~tunewise.errors.StoreError` saying how to resume it."""
    with Lease() as owned:
        try:
            yield owned
        except StoreError as err:
            if owned.run is None:
                raise
            raise StoreError(f"{err}; the trials stored so far are kept: once the store works again, continue "
                             f"with {resume_command(owned.run, owned.store.url)}") from None
        except KeyboardInterrupt as err:
            stop = err if isinstance(err, Interrupted) else Interrupted()
            if owned.run is None:
                raise stop from None
            with contextlib.suppress(Exception):  # Session.run has set it when the stop came while tuning
                if owned.store.get_run(owned.run).status == stores.RUNNING:
                    owned.store.set_status(owned.run, stores.INTERRUPTED)
            raise stop.of_run(owned.run, owned.store.url) from None


def _tune(source, store, run: int | None, settings: dict, scheduler, target, example_inputs, reporter: Reporter,
          compare_torch: bool, owned: Lease) -> TuneResult:
    """The job behind :func:`tune` (``run`` None: a new run) and :func:`resume`; ``store`` may be a URL.
    ``owned`` holds the run (a new run: from its creation).

    A time budget covers the whole job: tuning ends in time for the steps after it
    (:func:`~tunewise.timebudget.compile_estimate`).
    """
    start, phases = time.perf_counter(), {}
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
    check_folder(settings["output"] or "tunewise-out", "artifact folder")
    tvm_target = targets.resolve(target)
    targets.check_runnable(tvm_target)
    store = stores.create(store)
    tvm_env.prepare(tvm_target.kind.name)

    reporter.phase("importing the model")
    input_shapes = {k: tuple(v) for k, v in settings["input_shapes"].items()}
    imported = frontend.load(source, example_inputs=example_inputs, input_shapes=input_shapes, seed=seed)
    output = settings["output"] or os.path.abspath(os.path.join("tunewise-out", imported.name))
    phases["import"] = time.perf_counter() - start

    raise_if_stopped()
    measurer = measure.Measurer(tvm_target, measure.MeasureConfig(**settings["measure"]), evaluator=evaluator)
    try:
        stored = store.get_tasks(run) if run is not None else []
        reporter.phase("extracting tasks" + ("" if stored else " and measuring their default latency"))
        extract_start = time.perf_counter()
        model = tasks.extract(imported, tvm_target, level=level)
        build_seconds = time.perf_counter() - extract_start
        if not stored:
            model = tasks.measure_defaults(model, measurer)
        elif len(stored) == len(model.tasks):  # resuming: the default latencies the run was tuned against
            model = model.with_default_latencies(s.default_latency for s in stored)
        raise_if_stopped()
        if run is None:
            settings["output"] = output
            run = store.create_run(model.name, str(tvm_target), settings["scheduler"] or repr(scheduler), settings,
                                   owner=owned.owner)
            owned.hold(store, run)
        end = None if budget.time_budget is None else start + budget.time_budget

        def deadline(snapshot) -> float:
            return end - compile_estimate(build_seconds, model.untuned_latency(), snapshot.estimated_latency())

        loop = session.Session(model, scheduler, budget, measurer, store, run,
                               trials_per_slot=settings["trials_per_slot"], seed=seed, cost_model=cost_model_name,
                               share=settings.get("share", False), listeners=[reporter.slot], owner=owned.owner,
                               on_phase=reporter.slot_phase,
                               deadline=None if end is None else deadline)
        phases["extract"] = time.perf_counter() - start - phases["import"]
        reporter.phase(f"tuning as run {run} of {stores.display_url(store.url)}"
                       + (f", resumed after {len(loop.trials)} trials" if loop.trials else ""))
        left = None if end is None else deadline(loop.snapshot()) - time.perf_counter()
        reporter.tuning_started(model, budget if left is None or left <= 0 else dataclasses.replace(
            budget, time_budget=min(budget.time_budget, loop.elapsed + left)))
        tune_start = time.perf_counter()
        final = loop.run()
        phases["tune"] = time.perf_counter() - tune_start
        reporter.tuning_finished()
    finally:
        measurer.close()

    raise_if_stopped()
    reporter.phase("compiling the untuned model")
    untuned = compiler.CompiledModel(compiler.build(model), tvm_target)
    reporter.phase("compiling with the tuned records and checking outputs")
    compiled = compiler.CompiledModel(compiler.build(model, loop.database), tvm_target)
    max_error = compiler.verify(compiled, model.inputs, model.reference_outputs)
    reporter.phase("timing the untuned and tuned models" + (" and the references" if compare_torch else "")
                   + " in fresh processes")
    untuned_latency, tuned_latency, rounds = timings.time_compiled(untuned, compiled, model.inputs)
    eager, onnxruntime = (timings.time_references(source, model.inputs, example_inputs=example_inputs, seed=seed)
                          if compare_torch else (None, None))
    failures = sum(t.failures for t in final.tasks)
    compiled.metadata.update(
        model=model.name, graph_level=level, scheduler=type(scheduler).__name__, run=run,
        **compiler.io_metadata(model.inputs, model.reference_outputs, model.mod),
        latency_s=tuned_latency, untuned_latency_s=untuned_latency, torch_eager_latency_s=eager,
        onnxruntime_latency_s=onnxruntime, timing=timings.describe(rounds),
        trials=final.trials, failures=failures, tuning_seconds=final.elapsed, max_relative_error=max_error,
        evaluator=settings.get("evaluator", "fixed"), cost_model=cost_model_name, shared_trials=loop.shared,
        latency_estimate_history=[list(point) for point in loop.history],
    )
    compiled.save(output)
    with open(os.path.join(output, compiler.METADATA)) as f:
        store.add_artifact(run, output, json.load(f))
    store.set_status(run, stores.FINISHED)
    phases["compile"] = time.perf_counter() - start - sum(phases.values())
    return TuneResult(output, model.name, len(model.tasks), final.trials, failures, final.elapsed,
                      loop.decision_seconds, untuned_latency, tuned_latency, final.estimated_latency(),
                      max_error, eager, loop.shared, tuple(loop.history), run, phases, onnxruntime,
                      timings.describe(rounds))
