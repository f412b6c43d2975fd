"""The steps after tuning: compile the model with its run's best records, check its outputs, time it (with the
fastest model the run's checks measured, and on request the untuned model and the references) in fresh
processes taking turns, and save the faster tuned model as the artifact."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tunewise import target as targets
from tunewise.delivery import compile as compiler
from tunewise.delivery import timing as timings
from tunewise.tuning.model_checks import Checked, in_slow_stretch

RETIMES = 2
"""Timings after the first, at most, while the model a check read times in a slow stretch (:func:`steadiest`)."""
RETIME_SPACING = 20.0
"""Seconds from the start of a timing to the start of the next, at least (:func:`steadiest`)."""


@dataclass(frozen=True, kw_only=True)
class FinishRequest:
    """What :func:`finish` is asked for beside the model, its records and the artifact's folder.

    ``references`` times the references of ``source`` beside the tuned model (``example_inputs`` for a module;
    ``seed``: a zoo model's weights), in ``timing_rounds`` rounds at most; ``time_untuned`` compiles the untuned
    model too and times it in turn (off by default: its build and slow calls take time a time budget would give
    to tuning). ``metadata`` go into the artifact beside what finishing measured. ``checked`` is the fastest
    model the run's checks compiled, verified and measured, timed beside the tuned one and saved instead where
    faster; ``built`` is the model of the final records as a check after the run's last trial compiled and
    verified it (the tuned model, not compiled again). ``finish_by`` (a :func:`time.perf_counter` time; ``None``:
    no limit) bounds the timings made again in a slow stretch (:func:`steadiest`)."""

    source: object = None
    example_inputs: object = None
    seed: int = 0
    references: bool = True
    timing_rounds: int = timings.ROUNDS
    time_untuned: bool = False
    metadata: Mapping | None = None
    checked: Checked | None = None
    built: Checked | None = None
    finish_by: float | None = None


@dataclass(frozen=True, kw_only=True)
class Finished:
    """What :func:`finish` made and measured (latencies in seconds): the artifact's folder and metadata, the
    untuned (``None``: not timed) and tuned latencies, the tuned outputs' largest relative error, the references
    by their names in :data:`tunewise.delivery.timing.REFERENCES` (``None``: not timed), how the latencies were
    timed, and the tuned latency's ``ratios`` to the references timed, by name: the median over the rounds of
    its time over the reference's in the same round (:class:`tunewise.delivery.timing.SideBySide`), which the
    metadata hold as ``ratios``. ``since_check`` (``None``: no model a check read was timed) says how fast the
    machine runs now against while tuning: of a model a check read (the ``checked`` or the ``built`` one), the
    run's ``trials`` at that check, the latency the check read (``read_s``), its median time here (``timed_s``)
    and how many ``timings`` were made (:func:`steadiest`); the metadata hold it too."""

    artifact: str
    metadata: dict
    untuned_latency: float | None
    tuned_latency: float
    max_error: float
    references: dict
    timing: str
    ratios: dict[str, float]
    since_check: dict | None = None
    accuracy: dict | None = None  # tunewise.delivery.compile.accuracy of the saved model


def finish(model, database, output: str, request: FinishRequest = FinishRequest(), *,
           on_phase: Callable[[str], None] = lambda phase: None) -> Finished:
    """Compile ``model`` (an :class:`~tunewise.lowering.tasks.ExtractedModel` with its run's default latencies) with
    ``database``'s best records that beat them, check its outputs against the reference, time it in fresh
    processes taking turns with what ``request`` asks for (:class:`FinishRequest`), and save the faster of the
    tuned and the checked model to ``output``. ``on_phase`` is told each step as it starts. Raises
    :class:`~tunewise.errors.VerificationError` when the tuned outputs differ from the reference
    (:func:`tunewise.delivery.compile.compile_checked`).

    A whole-model check measures a model in a fresh process of its own, which on a shared machine can be far
    from another's, so only timing them side by side tells which is faster. The metadata say which records the
    artifact holds (``records``: ``"final"``, or ``"trial N"`` for the check after N trials) and, with
    ``checked``, both latencies. Where the model a check read (``checked``, else ``built``) times over 1.1x
    what its check read, all are timed again while another timing ends by ``finish_by``, :data:`RETIMES`
    times at most, and the timing where it ran nearest its reading is kept (:func:`steadiest`)."""
    checked, built, compare_torch = request.checked, request.built, request.references
    untuned = None
    if request.time_untuned:
        on_phase("compiling the untuned model")
        untuned = compiler.CompiledModel(compiler.build(model), model.target)
    if built is None:
        on_phase("compiling with the tuned records and checking outputs")
        compiled, max_error = compiler.compile_checked(model, database)
    else:
        compiled, max_error = built.compiled, built.max_error
    timed_models = {"untuned": untuned, "tuned": compiled, "checked": checked.compiled if checked else None}
    timed_models = {name: m for name, m in timed_models.items() if m is not None}
    on_phase(f"timing the {' and '.join(timed_models)} model{'s' if len(timed_models) > 1 else ''}"
             + (" and the references" if compare_torch else "") + " in fresh processes")
    references = (timings.References(request.source, request.example_inputs, request.seed) if compare_torch
                  else None)
    which, read = ("checked", checked) if checked is not None else ("tuned", built)  # a model a check read
    read_index = list(timed_models).index(which) if read is not None else None

    def retiming(slower: float) -> None:
        on_phase(f"timing again: the model a check read ran {slower:.2f}x that reading, the machine in a slow stretch")

    side, count = steadiest(
        lambda: timings.time_side_by_side(list(timed_models.values()), model.inputs, request.timing_rounds,
                                          references=references),
        read_index, None if read is None else read.latency, finish_by=request.finish_by, on_retime=retiming)
    latency = dict(zip(timed_models, side.latencies, strict=True))
    ratios = dict(zip(timed_models, side.ratios, strict=True))
    untuned_latency, tuned_latency, kept = latency.get("untuned"), latency["tuned"], "tuned"
    chosen: dict = {"records": "final"}
    if checked is not None:
        chosen.update(final_records_latency_s=tuned_latency, checked_records_latency_s=latency["checked"])
        if latency["checked"] < tuned_latency:
            compiled, tuned_latency, max_error = checked.compiled, latency["checked"], checked.max_error
            chosen["records"], kept = f"trial {checked.trials}", "checked"
    since_check = None if read is None else {
        "trials": read.trials, "read_s": read.latency, "timed_s": latency[which], "timings": count}
    how = timings.describe(side.rounds, references=compare_torch, models=tuple(timed_models))
    if count > 1:
        how += f"; the steadiest of {count} timings, the machine in a slow stretch"
    timed = dict.fromkeys(timings.REFERENCES) | side.references
    on_phase("checking the outputs on further random inputs")
    stated = compiler.accuracy(compiled, model)
    compiled.metadata.update(
        model=model.name, **(request.metadata or {}),
        **compiler.io_metadata(model.inputs, model.reference_outputs, model.mod),
        latency_s=tuned_latency, untuned_latency_s=untuned_latency, **chosen,
        **{f"{name}_latency_s": latency for name, latency in timed.items()}, ratios=ratios[kept], timing=how,
        max_relative_error=max_error, since_check=since_check, accuracy=stated,
        device=targets.cuda_description() if targets.is_gpu(model.target) else None,
    )
    compiled.save(output)
    with open(os.path.join(output, compiler.METADATA)) as f:
        saved = json.load(f)
    return Finished(artifact=output, metadata=saved, untuned_latency=untuned_latency, tuned_latency=tuned_latency,
                    max_error=max_error, references=timed, timing=how, ratios=ratios[kept], since_check=since_check,
                    accuracy=stated)


def steadiest(time_once: Callable[[], timings.SideBySide], read: int | None, reading: float | None, *,
              finish_by: float | None = None, on_retime: Callable[[float], None] = lambda slower: None,
              clock: Callable[[], float] = time.perf_counter,
              sleep: Callable[[float], None] = time.sleep) -> tuple[timings.SideBySide, int]:
    """The compiled models timed by ``time_once``, and how many timings that took. Where the model at index
    ``read`` (``None``: none) is one a check read at ``reading`` seconds and times in a slow stretch of the
    machine (:func:`tunewise.tuning.model_checks.in_slow_stretch`), they are timed again (``on_retime`` told
    first, with that model's time over its reading), :data:`RETIMES` times at most, each timing starting
    :data:`RETIME_SPACING` seconds after the one before at the earliest, and while another timing as long as
    the last ends by ``finish_by`` (a ``clock`` time; ``None``: no limit); of the timings, the one where that
    model ran nearest its reading is kept: a timing in a slow stretch says how fast the machine ran then, not
    the model (``bench/studies/checks/findings.md``)."""
    timed: list[timings.SideBySide] = []
    while True:
        started = clock()
        timed.append(time_once())
        took = clock() - started
        if read is None or not in_slow_stretch(timed[-1].latencies[read], reading) or len(timed) > RETIMES:
            break
        wait = max(0.0, started + RETIME_SPACING - clock())
        if finish_by is not None and clock() + wait + took > finish_by:
            break
        on_retime(timed[-1].latencies[read] / reading)
        sleep(wait)
    return min(timed, key=lambda side: side.latencies[read]) if read is not None else timed[0], len(timed)
