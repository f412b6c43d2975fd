"""The end-to-end job behind ``tunewise tune``: import, extract, tune, compile, verify, save.

Every measured trial is in the store (a run of its own, with the settings it was started with) before the
next slot starts, so a failure at any later step loses no tuning data, and :func:`resume` continues a run
that was cut short. A job owns its run (:mod:`tunewise.job.lease`) from its creation or its resumption to its
end, and stops cleanly on a stop request (:mod:`tunewise.job.interrupts`) between its steps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tunewise import energy, stores, zoo
from tunewise.budget import Budget
from tunewise.callbacks import Callback, CallbackList
from tunewise.delivery import timing as timings
from tunewise.delivery.destinations import check_folder
from tunewise.delivery.finish import Finished, FinishRequest, finish
from tunewise.errors import InputError, StoreError
from tunewise.job.interrupts import Interrupted, raise_if_stopped
from tunewise.job.lease import Lease
from tunewise.job.logs import quiet
from tunewise.job.prepare import prepare_run
from tunewise.report import RunSummary, summarize
from tunewise.settings import RunSettings
from tunewise.tuning import tvm_env
from tunewise.tuning.session import Session
from tunewise.tuning.timebudget import short_budget_note

_log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TuneResult:
    """What ``tune`` produced and measured (latencies in seconds)."""

    artifact: str
    model: str
    tasks: int
    trials: int
    failures: int
    tuning_seconds: float
    decision_seconds: float
    untuned_latency: float | None  # None: not timed (``time_untuned``)
    tuned_latency: float
    estimated_latency: float
    max_error: float
    torch_latency: float | None = None  # PyTorch eager (of the module, zoo model or .pt2 program)
    shared: int = 0  # trials that were schedules transferred from other tasks or runs (tunewise.sharing)
    history: tuple[tuple[float, float], ...] = field(default=())
    run: int | None = None  # the run's id in the store
    phase_seconds: dict[str, float] = field(default_factory=dict)  # wall time of import, extract, tune, compile
    onnxruntime_latency: float | None = None
    openvino_latency: float | None = None  # OpenVINO in its default precision, where installed (CPU)
    openvino_f32_latency: float | None = None  # OpenVINO in f32, where installed (CPU)
    timing: str = timings.describe()  # how the latencies were timed
    stopped_by: str | None = None  # the stop rule that ended tuning, in its words
    measured: tuple = ()  # the whole-model latencies measured while tuning (tunewise.stores.ModelLatency)
    joules: float | None = None  # energy the tuning used (None: not metered)
    joules_estimated: bool = False  # the meter estimates rather than measures
    skipped: int = 0  # proposals the candidate filter skipped, over the whole run
    cuda_graph_latency: float | None = None  # on a GPU: PyTorch captured in one CUDA graph on one stream
    aot_latency: float | None = None  # on a GPU: tunewise.runtime.aot, Nimble's graph over several streams
    joules_parts: dict[str, float] = field(default_factory=dict)  # a GPU run's by device (nvml, estimate), one sitting
    records: str = "final"  # the artifact's records: the run's final ones, or "trial N" (a check's, faster)
    final_latency: float | None = None  # the final records' latency, timed beside a check's (None: not timed)
    untuned_estimate: float = math.inf  # the untuned model's latency, estimated from its tasks' default latencies
    ratios: dict[str, float] = field(default_factory=dict)  # tuned over each reference, per round timed in turn
    since_check: dict | None = None  # a model a check read, timed again after tuning (delivery.finish.Finished)
    base_tasks: int = 0  # tasks that started from a record base's records (tunewise.sharing.RecordBase)
    records_base: str | None = None  # the run's records_base setting
    pretrained_tasks: int = 0  # tasks whose first slot the pretrained cost model ranked (this sitting's)
    precision: str = "float32"  # what the model computes in (tunewise.lowering.precision.PRECISIONS)
    accuracy: dict | None = None  # on further random inputs: tunewise.delivery.compile.accuracy

    def references(self) -> dict[str, float]:
        """The references timed beside the tuned model, by their names in
        :data:`tunewise.delivery.timing.REFERENCES`."""
        timed = {"torch_eager": self.torch_latency, "onnxruntime": self.onnxruntime_latency,
                 "openvino": self.openvino_latency, "openvino_f32": self.openvino_f32_latency,
                 "cuda_graph": self.cuda_graph_latency, "aot": self.aot_latency}
        return {name: latency for name, latency in timed.items() if latency is not None}


@quiet("tune")
def tune(source, settings: RunSettings | None = None, *, example_inputs=None, target=None, store=None,
         callbacks: Sequence[Callback | str] = (), compare_torch: bool | None = None, progress: bool | None = None,
         **overrides) -> TuneResult:
    """Tune ``source`` (zoo name, ``.onnx``/``.pt2`` path, or ``nn.Module`` with ``example_inputs``) for
    ``target`` (:func:`tunewise.target.resolve`: this CPU by default) as ``settings`` say
    (:class:`~tunewise.settings.RunSettings`; its defaults when ``None``), with ``overrides`` replacing some of
    their fields by name (``budget=Budget(time_budget=600)``, ``share="off"``; ``None`` for a field that cannot
    be ``None`` keeps the settings' own: :func:`with_overrides`). ``scheduler`` may also be a scheduler object.

    ``callbacks`` (:mod:`tunewise.callbacks`: instances or names) are told every step and slot. ``progress``
    adds the live display of ``tunewise tune``; by default it is on when standard output is a terminal or a
    notebook. ``compare_torch`` is the settings' ``references``. Without ``time_untuned`` the result's
    ``untuned_latency`` is ``None`` and ``untuned_estimate`` (its tasks' default latencies) stands in for it.
    Every trial goes to ``store`` (a :class:`~tunewise.stores.Store` or its URL; default
    ``sqlite:///tunewise.db``) as a new run, which :func:`resume` continues if this one is cut short. Writes
    the verified artifact to the settings' ``output`` (default ``tunewise-out/MODEL``). Raises
    :class:`~tunewise.errors.TunewiseError` subclasses on bad input.
    """
    settings, scheduler = with_overrides(settings or RunSettings(), {**overrides, **_finish(
        {"compare_torch": compare_torch})})
    if isinstance(source, str) and source not in zoo.MODELS and os.path.isfile(source):
        source = os.path.abspath(source)  # a resumed run may start elsewhere
    settings = dataclasses.replace(settings, source=source if isinstance(source, str) else None,
                                   output=os.path.abspath(settings.output) if settings.output else None)
    if not settings.budget.bounded:
        raise InputError("set a budget: trials, time or trials per task")
    owned = None
    try:
        with _ownership() as owned:
            return _tune(source, store, None, settings, scheduler, target, example_inputs,
                         _callbacks(callbacks, progress), owned)
    finally:  # a store opened from its URL (once the inputs were checked) is closed when the job ends
        if owned is not None and owned.store is not None and not isinstance(store, stores.Store):
            owned.store.close()


KEPT_ON_NONE = ("budget", "measure", "references", "timing_rounds", "time_untuned")
"""The settings an override of ``None`` leaves as they are (:func:`with_overrides`)."""


def with_overrides(settings: RunSettings, overrides: Mapping) -> tuple[RunSettings, object]:
    """``settings`` with ``overrides`` (field name -> value) replacing their fields, and the run's scheduler
    (a name, or the scheduler object given as ``scheduler``, which the settings then hold as ``None``). ``None``
    for a field that cannot be ``None`` (:data:`KEPT_ON_NONE`) keeps the settings' own; an unknown name is an
    :class:`~tunewise.errors.InputError` listing the valid ones."""
    names = [f.name for f in dataclasses.fields(RunSettings)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise InputError(f"unknown settings {', '.join(unknown)}; valid: {', '.join(names)}")
    changes = {k: v for k, v in overrides.items() if not (k in KEPT_ON_NONE and v is None)}
    scheduler = changes.get("scheduler", settings.scheduler)
    if scheduler is not None and not isinstance(scheduler, str):
        changes["scheduler"] = None
    return dataclasses.replace(settings, **changes), scheduler


def _callbacks(callbacks: Sequence[Callback | str], progress: bool | None) -> CallbackList:
    """``callbacks``, and the live display when ``progress`` (``None``: stdout is a terminal or a notebook)."""
    if progress is None:
        from rich.console import Console

        console = Console()
        progress = console.is_terminal or console.is_jupyter
    return CallbackList([*callbacks, *(["progress"] if progress else [])])


@quiet("tune")
def resume(run: int, *, store=None, budget: Budget | Mapping | None = None, source=None,
           example_inputs=None, scheduler=None, callbacks: Sequence[Callback | str] = (),
           output: str | None = None, progress: bool | None = None, **finishing) -> TuneResult:
    """Continue run ``run`` of ``store`` where it stopped (killed, interrupted, failed, or finished and given
    a larger ``budget``), with the settings it was started with: what it measured is kept and counts against
    the budget, and no candidate is measured twice. ``source`` and ``scheduler`` are needed only when the
    run was started with Python objects for them.

    ``budget`` (a :class:`~tunewise.budget.Budget`, or a mapping of some of its fields) replaces the limits
    it sets and keeps the run's other limits; the budget so made is stored in the run's settings. ``output``
    replaces the run's artifact folder, and ``finishing``, of ``compare_torch``, ``timing_rounds`` and
    ``time_untuned``, the run's finish (:func:`tune`'s; ``None``: the run's own), in the store too. Settings
    stored in an older form are stored again in the full one (:meth:`~tunewise.settings.RunSettings.from_json`).
    ``callbacks`` and ``progress`` are :func:`tune`'s. Raises :class:`~tunewise.errors.RunBusyError` when another
    live process owns the run.
    """
    finishing = _finish(finishing)
    with _opened(store, must_exist=True) as store:
        spec = store.get_run(run)
        if spec.status == stores.IMPORTED:
            raise InputError(f"run {run} is an import of records, not a tuning run")
        try:
            settings = RunSettings.from_json(spec.settings)
        except InputError as err:
            raise InputError(f"run {run} cannot be resumed: {err}") from None
        if budget is not None:
            settings = settings.with_limits(budget)
        source = source if source is not None else settings.source
        scheduler = scheduler if scheduler is not None else settings.scheduler
        if source is None or scheduler is None:
            raise InputError(f"run {run} was started with a Python model or scheduler object: pass it again")
        if output is not None:
            settings = dataclasses.replace(settings, output=check_folder(output, "artifact folder"))
        settings = dataclasses.replace(settings, **finishing)
        with _ownership() as owned:
            owned.claim(store, run)
            if settings.to_json() != spec.settings:
                store.update_settings(run, settings.to_json())
            return _tune(source, store, run, settings, scheduler, spec.target, example_inputs,
                         _callbacks(callbacks, progress), owned)


_FINISHING = {"compare_torch": "references", "timing_rounds": "timing_rounds", "time_untuned": "time_untuned"}


def _finish(given: Mapping) -> dict:
    """The finish :func:`tune` and :func:`resume` are given (:data:`_FINISHING`'s keywords; those not ``None``),
    by settings field name."""
    unknown = sorted(set(given) - set(_FINISHING))
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
    return {_FINISHING[name]: value for name, value in given.items() if value is not None}


def resume_command(run: int, store_url: str | None) -> str:
    """The command line that resumes run ``run`` of the store at ``store_url`` (its password hidden)."""
    store = "" if store_url in (None, stores.DEFAULT_URL) else f" --store {stores.display_url(store_url)}"
    return f"tunewise tune --resume {run}{store}"


@contextlib.contextmanager
def _opened(store, **options):
    """The store ``store`` is, or names: opened from a URL (:func:`tunewise.stores.create` with ``options``) for
    the ``with`` block and closed at its end, so that a SQLite file holds the whole run once the job returns
    (nothing left in its write-ahead log) and can be copied; a :class:`~tunewise.stores.Store` given is the
    caller's, left open. (:func:`tune` opens its store later, once the inputs are checked, and closes it as
    this does.)"""
    if isinstance(store, stores.Store):
        yield store
        return
    opened = stores.create(store, **options)
    try:
        yield opened
    finally:
        opened.close()


@contextlib.contextmanager
def _ownership():
    """A :class:`~tunewise.job.lease.Lease` for a job; a stop (Ctrl-C) that ends the job is raised as
    :class:`~tunewise.job.interrupts.Interrupted` naming the run the lease holds, left ``interrupted``, and the
    trials it holds; a store that fails while the job holds a run leaves it ``failed`` and raises
    :class:`~tunewise.errors.StoreError` saying what it kept and how to resume it."""
    with Lease() as owned:
        try:
            yield owned
        except StoreError as err:
            if owned.run is None:
                raise
            kept = "every stored trial kept"
            with contextlib.suppress(Exception):  # the store may be unreadable too
                if owned.store.get_run(owned.run).status == stores.RUNNING:  # it failed before tuning began
                    owned.store.set_status(owned.run, stores.FAILED)
                count = len(owned.store.get_trials(owned.run, records=False))
                kept = f"{count} stored trial{'' if count == 1 else 's'} kept"
            raise StoreError(f"{err}; {kept}: once the store works again, continue with "
                             f"{resume_command(owned.run, owned.store.url)}") from None
        except KeyboardInterrupt as err:
            stop = err if isinstance(err, Interrupted) else Interrupted()
            if owned.run is None:
                raise stop from None
            kept = None
            with contextlib.suppress(Exception):  # Session.run has set it when the stop came while tuning
                if owned.store.get_run(owned.run).status == stores.RUNNING:
                    owned.store.set_status(owned.run, stores.INTERRUPTED)
                kept = len(owned.store.get_trials(owned.run, records=False))
            raise stop.of_run(owned.run, owned.store.url, kept) from None


def _tune(source, store, run: int | None, settings: RunSettings, scheduler, target, example_inputs,
          callbacks: CallbackList, owned: Lease) -> TuneResult:
    """The job behind :func:`tune` (``run`` None: a new run) and :func:`resume`; ``store`` may be a URL.
    ``owned`` holds the run (a new run: from its creation).

    A time budget covers the whole job: tuning ends in time for the steps after it
    (:func:`~tunewise.tuning.timebudget.compile_estimate`).
    """
    start = time.perf_counter()
    budget = settings.budget
    check_folder(settings.output or "tunewise-out", "artifact folder")
    end = None if budget.time_budget is None else start + budget.time_budget
    prepared = prepare_run(source, settings, store=store, target=target, example_inputs=example_inputs,
                           scheduler=scheduler, callbacks=callbacks.callbacks, run=run, lease=owned, finish_by=end)
    model, session = prepared.model, prepared.session
    store, run, output = session.store, session.run_id, settings.artifact_folder(model.name)
    phases = {"import": prepared.import_seconds, "extract": time.perf_counter() - start - prepared.import_seconds}
    with prepared:
        callbacks.phase(f"tuning as run {run} of {stores.display_url(store.url)}"
                        + (f", resumed after {len(session.trials)} trials" if session.trials else ""))
        left = None if end is None else session.ledger.seconds_left()
        kept = None if end is None else end - time.perf_counter() - left  # for the steps after tuning
        before = session.ledger.trials
        callbacks.tuning_started(session.model, budget if left is None or left <= 0 else dataclasses.replace(
            budget, time_budget=min(budget.time_budget, session.elapsed + left)))
        tune_start, parts_start = time.perf_counter(), _energy_parts(session.meter)
        final = session.run()
        phases["tune"] = time.perf_counter() - tune_start
        parts = {name: joules - parts_start[name] for name, joules in _energy_parts(session.meter).items()}
        callbacks.tuning_finished()
    note = None if left is None else short_budget_note(budget.time_budget, left, imported=phases["import"],
                                                       extracted=phases["extract"], kept=kept,
                                                       measured=final.trials - before)
    if note is not None:
        _log.warning("%s", note)
    model = session.model  # with the default latencies the run measured or stored

    raise_if_stopped()
    summary = summarize(store, run)  # what the run did, for the artifact and the result alike
    checker = session.checker
    done = finish(model, session.database, output, FinishRequest(
        source=source, example_inputs=example_inputs, seed=settings.seed, references=settings.references,
        timing_rounds=settings.timing_rounds, time_untuned=settings.time_untuned, finish_by=end,
        metadata=dict(
            graph_level=model.level, precision=model.precision, scheduler=type(session.scheduler).__name__, run=run,
            trials=summary.trials, failures=summary.failures, tuning_seconds=summary.elapsed,
            evaluator=settings.evaluator, cost_model=settings.cost_model, shared_trials=session.shared,
            pretrained_tasks=session.pretrained_tasks, versions=tvm_env.versions(),
            latency_estimate_history=[list(point) for point in session.history]),
        checked=None if checker is None else checker.fastest_before(final.trials),
        built=None if checker is None else checker.holding(final.trials)), on_phase=callbacks.phase)
    store.add_artifact(run, output, done.metadata)
    store.set_status(run, stores.FINISHED)
    phases["compile"] = time.perf_counter() - start - sum(phases.values())
    return _result(summary, done, session, name=model.name, phases=phases, joules_parts={} if before else parts)


def _result(summary: RunSummary, done: Finished, session: Session, *, name: str, phases: dict[str, float],
            joules_parts: dict[str, float]) -> TuneResult:
    """The :class:`TuneResult` of a finished run: what the run did as its store tells it (``summary``), what
    the finishing step measured (``done``), and what the tuning process alone knows (``session``, and
    ``joules_parts``: the tuning's energy by device, when the run was tuned in one sitting)."""
    timed, meter, shared = done.references, session.meter, session.shared
    return TuneResult(artifact=done.artifact, model=name, tasks=len(summary.tasks), trials=summary.trials,
                      failures=summary.failures, tuning_seconds=summary.elapsed,
                      decision_seconds=session.decision_seconds, untuned_latency=done.untuned_latency,
                      tuned_latency=done.tuned_latency,
                      estimated_latency=summary.estimate, max_error=done.max_error,
                      torch_latency=timed["torch_eager"], shared=shared, history=summary.curve, run=summary.run.id,
                      phase_seconds=phases, onnxruntime_latency=timed["onnxruntime"], timing=done.timing,
                      stopped_by=session.ledger.stopped_by, measured=summary.measured,
                      joules=summary.joules if meter is not None else None,
                      joules_estimated=meter is not None and meter.read().estimated,
                      skipped=sum(c.skipped for c in summary.checkpoints),
                      openvino_latency=timed["openvino"], openvino_f32_latency=timed["openvino_f32"],
                      cuda_graph_latency=timed["cuda_graph"], aot_latency=timed["aot"],
                      joules_parts=joules_parts, records=done.metadata.get("records", "final"),
                      final_latency=done.metadata.get("final_records_latency_s"), untuned_estimate=summary.untuned,
                      ratios=done.ratios, since_check=done.since_check, base_tasks=summary.base_tasks,
                      precision=session.model.precision, accuracy=done.accuracy,
                      records_base=summary.run.settings.get("records_base"),
                      pretrained_tasks=session.pretrained_tasks)


def _energy_parts(meter) -> dict[str, float]:
    """The joules of each part of a combined meter (a GPU's and its host's) since it was made, by backend name;
    empty for no meter or a meter of one part."""
    if not isinstance(meter, energy.Combined):
        return {}
    return {name: reading.joules for name, reading in meter.parts().items()}
