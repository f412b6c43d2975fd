"""Putting a tuning run together from its settings: target, model, tasks, measurer, store run, session.

:func:`prepare_run` is the whole chain (what :func:`tunewise.tune` runs before tuning); :func:`load_model` and
:func:`open_session` are its two halves, for a driver that tunes one extracted model several times (the
bench scripts: one extraction, one run per scheduler, seed or evaluator).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tunewise import energy, filters, schedulers, sharing, stoppers, stores
from tunewise import target as targets
from tunewise.callbacks import Callback, CallbackList
from tunewise.delivery import timing
from tunewise.errors import InputError
from tunewise.forecast import Forecaster
from tunewise.importing import frontend
from tunewise.job.interrupts import raise_if_stopped
from tunewise.lowering import precision as precisions
from tunewise.lowering import tasks
from tunewise.settings import RunSettings
from tunewise.tuning import measure, tvm_env
from tunewise.tuning.model_checks import ModelCheck
from tunewise.tuning.session import Session, SessionParts
from tunewise.tuning.timebudget import compile_estimate


def load_model(source, settings: RunSettings, *, target=None, measurer: measure.Measurer | None = None,
               example_inputs=None) -> tasks.ExtractedModel:
    """``source`` (zoo name, ``.onnx``/``.pt2`` path, or ``nn.Module`` with ``example_inputs``) imported with
    the settings' input shapes and seed, and its tasks extracted at their graph level for ``target`` (a TVM
    target, or what :func:`tunewise.target.resolve` takes); with a ``measurer``, their default latencies
    measured (:func:`tunewise.lowering.tasks.measure_defaults`)."""
    tvm_target = targets.resolve(target)
    precisions.check(settings.precision, tvm_target)
    tvm_env.prepare(tvm_target.kind.name)
    imported = frontend.load(source, example_inputs=example_inputs, input_shapes=settings.input_shapes,
                             seed=settings.seed)
    return tasks.extract(imported, tvm_target, level=settings.level, precision=settings.precision,
                         measurer=measurer)


def make_measurer(target, settings: RunSettings) -> measure.Measurer:
    """The measurer the settings ask for: their measure configuration, evaluator and runner, for ``target``."""
    return measure.Measurer(target, settings.measure, evaluator=settings.evaluator, runner=settings.runner)


def resolve_goal(settings: RunSettings, source, inputs, *, example_inputs=None, target=None) -> float | None:
    """The settings' latency goal in seconds (``None``: none); a goal relative to onnxruntime or PyTorch eager
    times them first, on ``inputs``, in a fresh process, on ``target``'s device (a TVM target; the host CPU by
    default; :func:`tunewise.delivery.timing.time_references_on`)."""
    goal = settings.goal
    if goal is None:
        return None
    if not goal.relative:
        return goal.resolve()
    timed = timing.time_references_on(targets.resolve(target), source, inputs, example_inputs=example_inputs,
                                      seed=settings.seed)
    return goal.resolve(eager=timed["torch_eager"], onnxruntime=timed["onnxruntime"])


def stop_rules(settings: RunSettings, goal: float | None) -> list[stoppers.StopRule]:
    """The stop rules the settings ask for, with the latency goal ``goal`` (seconds) resolved: the goal counts
    only a measured model latency (the checks measure the model sooner once the estimate reaches it)."""
    rules: list[stoppers.StopRule] = []
    if goal is not None:
        rules.append(stoppers.create("goal", latency=goal, measured_only=True))
    if settings.energy_budget is not None:
        rules.append(stoppers.create("budget", joules=settings.energy_budget))
    if settings.diminishing is not None:
        rules.append(stoppers.create("diminishing", phi=settings.diminishing))
    if settings.give_up is not None and goal is not None:
        rules.append(stoppers.create("give-up", latency=goal, probability=settings.give_up))
    return rules


def make_checker(settings: RunSettings, goal: float | None) -> ModelCheck | None:
    """The whole-model checks ``settings`` ask for (:attr:`RunSettings.check_interval`; ``None``: none), with
    the latency goal ``goal`` (seconds)."""
    every = settings.check_interval
    return None if every is None else ModelCheck(every, goal=goal)


FROM_SETTINGS = object()
""":attr:`Resolved.records_base` when the session opens the base its settings name."""


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """What the caller of :func:`open_session` made of the settings already, used instead of what the session
    would make of them: ``goal``, the latency goal in seconds (``None``: the settings' absolute goal, or none; a
    relative one needs :func:`resolve_goal`); ``checker``, the whole-model checks (``None``: those the settings
    ask for, :func:`make_checker`); ``records_base``, the record base read (:func:`tunewise.sharing.open_base`;
    ``None``: none; :data:`FROM_SETTINGS`: the one the settings name)."""

    goal: float | None = None
    checker: ModelCheck | None = None
    records_base: object = FROM_SETTINGS


def open_session(model: tasks.ExtractedModel, settings: RunSettings, *, store, measurer: measure.Measurer,
                 scheduler=None, callbacks: Sequence[Callback | str] = (), run: int | None = None, lease=None,
                 deadline=None, resolved: Resolved = Resolved()) -> Session:
    """A :class:`~tunewise.tuning.session.Session` tuning ``model`` as ``settings`` say, recording to ``store`` (a
    :class:`~tunewise.stores.Store`).

    ``run`` None makes a new run whose stored settings are ``settings`` with the artifact folder filled in
    (:meth:`RunSettings.artifact_folder`); otherwise the session resumes run ``run``. ``scheduler`` (a
    scheduler object, or a name) replaces the settings' scheduler, seeded with their seed. ``measurer`` is
    the caller's, and should measure as the settings say (:func:`make_measurer`). With ``lease``
    (:class:`tunewise.job.lease.Lease`) a new run is held by it from its creation, and the session commits only
    while it holds the run. ``deadline`` is :class:`~tunewise.tuning.session.SessionParts`'. The session's
    forecaster, meter, stop rules (:func:`stop_rules`), checks and candidate filter are the settings', seeded
    with their seed; ``resolved`` replaces the goal, the checks or the record base (:class:`Resolved`).
    """
    goal = resolved.goal
    if goal is None and settings.goal is not None:
        if settings.goal.relative:
            raise InputError(f"latency goal {settings.goal} is relative: resolve it first (prepare.resolve_goal)")
        goal = settings.goal.resolve()
    scheduler = schedulers.create_seeded(scheduler if scheduler is not None else settings.scheduler, settings.seed)
    owner = None if lease is None else lease.owner
    meter = energy.for_device(settings.energy_meter, targets.is_gpu(model.target))
    if run is None:  # stored with the meter "auto" chose here and the model's graph level, which a resumed run keeps
        stored = dataclasses.replace(settings, output=settings.artifact_folder(model.name), energy_meter=meter.name,
                                     level=model.level)
        run = store.create_run(model.name, str(model.target), settings.scheduler or repr(scheduler),
                               stored.to_json(), owner=owner)
        if lease is not None:
            lease.hold(store, run)
    records_base = resolved.records_base
    if records_base is FROM_SETTINGS:
        records_base = sharing.open_base(settings.records_base, model.target)
    return Session(model, scheduler, settings.budget, measurer, store, run, SessionParts(
        trials_per_slot=settings.trials_per_slot, seed=settings.seed, cost_model=settings.cost_model,
        share=settings.share, warm_start=settings.warm_start, records_base=records_base,
        pretrained=settings.pretrained, callbacks=callbacks, owner=owner, deadline=deadline,
        stoppers=stop_rules(settings, goal), meter=meter, forecaster=Forecaster(goal=goal, seed=settings.seed),
        checker=make_checker(settings, goal) if resolved.checker is None else resolved.checker,
        candidate_filter=(None if settings.candidate_filter is None
                          else filters.create(settings.candidate_filter, seed=settings.seed))))


@dataclass(frozen=True)
class PreparedRun:
    """A run ready to tune: ``session.run()`` tunes it. Closing it (or leaving its ``with`` block) closes the
    measurer the session uses. ``model`` is the model as extracted, its default latencies unmeasured for a new
    run (``session.model`` has them once tuning started). ``import_seconds`` and ``extract_seconds`` are the
    wall time of the import and of the graph passes and task extraction."""

    model: tasks.ExtractedModel
    session: Session
    import_seconds: float
    extract_seconds: float

    def close(self) -> None:
        self.session.measurer.close()

    def __enter__(self) -> PreparedRun:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def prepare_run(source, settings: RunSettings, *, store=None, target=None, example_inputs=None, scheduler=None,
                callbacks: Sequence[Callback | str] = (), run: int | None = None, lease=None,
                finish_by: float | None = None) -> PreparedRun:
    """Resolve ``target`` and check it can run here, open ``store`` (a :class:`~tunewise.stores.Store` or its
    URL; default ``sqlite:///tunewise.db``), import ``source`` (``settings.source`` when None) while the
    measurer starts, extract the tasks and open the session (:func:`open_session`), which measures their default
    latencies after its first slot (a resumed ``run`` reuses those it stored).

    ``callbacks`` are told each step (:meth:`~tunewise.callbacks.Callback.phase`) and, through the session,
    every slot. ``finish_by`` (a ``time.perf_counter()`` instant) ends tuning in time for compiling the model
    by then (:func:`~tunewise.tuning.timebudget.compile_estimate`; the compiled models, the untuned one too with the
    settings' ``time_untuned``, timed in their ``timing_rounds`` rounds, and the references after them unless
    their ``references`` is false). A stop request between steps raises
    :class:`~tunewise.job.interrupts.Interrupted`. Raises :class:`~tunewise.errors.TunewiseError` subclasses on
    bad input, before the store is opened when the input is the target or the source.
    """
    start = time.perf_counter()
    source = settings.source if source is None else source
    if isinstance(source, str):
        frontend.check_source(source)
    tvm_target = targets.resolve(target)
    targets.check_runnable(tvm_target)
    targets.check_cores(tvm_target)
    precisions.check(settings.precision, tvm_target)
    base = sharing.open_base(settings.records_base, tvm_target)  # a bad base file is an error before the import
    store = stores.create(store)
    callbacks = CallbackList(callbacks)

    callbacks.phase("importing the model")
    tvm_env.prepare(tvm_target.kind.name)
    background = cf.ThreadPoolExecutor(1)  # the measurer's worker processes start while the model is imported
    starting = background.submit(make_measurer, tvm_target, settings)
    background.shutdown(wait=False)
    try:
        imported = frontend.load(source, example_inputs=example_inputs, input_shapes=settings.input_shapes,
                                 seed=settings.seed)
        import_seconds = time.perf_counter() - start
        raise_if_stopped()
        if settings.goal is not None and settings.goal.relative:
            callbacks.phase(f"timing the references of latency goal {settings.goal} in a fresh process")
        goal = resolve_goal(settings, source, imported.inputs, example_inputs=example_inputs, target=tvm_target)
        callbacks.phase("extracting tasks")
        extract_start = time.perf_counter()
        model = tasks.extract(imported, tvm_target, level=settings.level, precision=settings.precision)
        extract_seconds = time.perf_counter() - extract_start
        raise_if_stopped()
        try:
            measurer = starting.result()
        except Exception:
            raise_if_stopped()  # a Ctrl-C to the process group kills a measurer's worker that is still starting
            raise
    except BaseException:
        with contextlib.suppress(Exception):
            starting.result().close()
        raise
    try:
        checker = make_checker(settings, goal)

        def deadline(snapshot) -> float:
            built = None if checker is None else checker.build_seconds  # measured by the run's last check
            untuned = snapshot.untuned_latency() if settings.time_untuned else None
            return finish_by - compile_estimate(extract_seconds if built is None else built, untuned,
                                                snapshot.estimated_latency(), references=settings.references,
                                                rounds=settings.timing_rounds, checked=bool(snapshot.measured))

        opened = open_session(model, settings, store=store, measurer=measurer, scheduler=scheduler,
                              callbacks=callbacks.callbacks, run=run, lease=lease,
                              deadline=None if finish_by is None else deadline,
                              resolved=Resolved(goal=goal, checker=checker, records_base=base))
    except BaseException:
        measurer.close()
        raise
    return PreparedRun(model=model, session=opened, import_seconds=import_seconds, extract_seconds=extract_seconds)
