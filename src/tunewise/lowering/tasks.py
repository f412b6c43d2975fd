"""Tunable tasks: extraction from the optimised model, with weight, FLOPs and untuned latency.

Extraction lowers the module that :func:`tunewise.lowering.graph.optimize` returned as compilation does
(:func:`tunewise.lowering.graph.lower`), so every record tuned for a task applies at compile time. A model with an
operator that compiles at no graph level stops there, before anything is measured or tuned
(:class:`~tunewise.errors.UnsupportedOperatorError`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from tunewise.lowering import graph
from tunewise.lowering import precision as precisions
from tunewise.lowering.rewriting import rewriting_pass
from tunewise.tuning.estimate import model_latency


@dataclass(frozen=True)
class Task:
    """One tunable operator of a model: a frozen value.

    ``weight`` is how many times the operator occurs in the model, ``flops`` its floating-point operations
    per call, ``default_latency`` its measured latency (seconds) under the default, untuned schedule
    (``inf`` when that failed to build or run).
    """

    name: str
    workload: str  # structural hash of the task's TIR module, as hex
    weight: int
    flops: float
    default_latency: float

    @property
    def default_gflops(self) -> float:
        return self.flops / self.default_latency / 1e9 if 0 < self.default_latency < math.inf else 0.0


@dataclass(frozen=True)
class ExtractedModel:
    """A model ready to tune: the optimised Relax module, its tasks and their TIR modules (same order), and
    the graph level it was optimised at (:data:`tunewise.lowering.graph.LEVELS`), which its compilation follows.

    ``defaults_measured`` says whether the tasks' default latencies were measured; until they are, they are
    ``inf`` (a new :class:`~tunewise.tuning.session.Session` then measures them after its first slot).
    """

    name: str
    mod: object  # the Relax module both extracted from and compiled
    target: object
    tasks: tuple[Task, ...]
    task_mods: tuple[object, ...]
    level: str
    inputs: tuple = ()
    precision: str = precisions.DEFAULT  # what the module computes in (tunewise.lowering.precision.PRECISIONS)
    samples: tuple = ()  # further (inputs, reference outputs), tunewise.importing.frontend.SAMPLES
    reference_outputs: tuple = ()
    defaults_measured: bool = False

    def with_default_latencies(self, latencies) -> ExtractedModel:
        """This model with its tasks' default latencies replaced (measured, or those a stored run was tuned
        against)."""
        return dataclasses.replace(self, tasks=tuple(dataclasses.replace(t, default_latency=latency)
                                                     for t, latency in zip(self.tasks, latencies, strict=True)),
                                   defaults_measured=True)

    def heaviest(self, n: int) -> ExtractedModel:
        """This model reduced to its ``n`` tasks of largest weighted default latency, in their original order
        (for benchmarks that tune only where the time goes)."""
        order = sorted(range(len(self.tasks)), key=lambda k: -self.tasks[k].weight * self.tasks[k].default_latency)
        keep = sorted(order[:n])
        return dataclasses.replace(self, tasks=tuple(self.tasks[k] for k in keep),
                                   task_mods=tuple(self.task_mods[k] for k in keep))

    def untuned_latency(self) -> float:
        """Sum of weighted default latencies: the model-latency estimate before any tuning."""
        return model_latency((t.weight, t.default_latency, math.inf) for t in self.tasks)


def _flops(mod) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops

    try:
        return float(estimate_tir_flops(mod))
    except Exception:  # some operators (e.g. with data-dependent loops) have no FLOP estimate
        return 0.0


def args_info(mod):
    """MetaSchedule argument descriptions of a task module's ``main`` (what the runner allocates); for a
    scheduled module whose weights are read in a layout of its own (prepacked), the arguments it takes once the
    layout rewrite is split out, as MetaSchedule's own searches describe them."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    return ArgInfo.from_entry_func(mod, remove_preproc=True)


def _in_place_as_call_tir(mod):
    """``mod`` (a lowered module) with each ``call_tir_inplace`` whose in-place arguments are its last ones written
    as the ``call_tir`` of the same function without them: the same functions and call counts, for MetaSchedule's
    task extraction, which sees ``call_tir`` only. Not a module to run."""
    from tvm import relax

    def rewrite(_builder, call):
        gv, args = call.args[0], list(call.args[1].fields)
        indices = [int(i) for i in call.attrs.inplace_indices]
        if indices != list(range(len(args) - len(indices), len(args))):
            return None
        return relax.call_tir(gv, relax.Tuple(args[:len(args) - len(indices)]), call.ty_args[0])

    return rewriting_pass(("relax.call_tir_inplace",), rewrite, "InPlaceAsCallTIR")(mod)


def extract(imported, target, *, level: str | None = None, precision: str = precisions.DEFAULT,
            measurer=None) -> ExtractedModel:
    """Optimise ``imported`` (a :class:`tunewise.importing.frontend.ImportedModel`) at graph level ``level`` (``None``:
    the target's, :func:`tunewise.lowering.graph.default_level`) in ``precision``
    (:mod:`tunewise.lowering.precision`) and extract its tasks.

    With a ``measurer`` (:class:`tunewise.tuning.measure.Measurer`) the default latencies are measured
    (:func:`measure_defaults`); without one they are left at ``inf``. Raises
    :class:`~tunewise.errors.UnsupportedOperatorError` when an operator compiles at no graph level.
    """
    from tvm.s_tir import meta_schedule as ms
    from tvm_ffi import structural_hash

    level = graph.default_level(target) if level is None else level
    mod, lowered = graph.optimize_and_lower(imported.mod, target, level, precision)
    extracted = [t for t in ms.relax_integration.extract_tasks(_in_place_as_call_tir(lowered), target)
                 if not t.dispatched[0].attrs or not t.dispatched[0].attrs.get("tirx.is_scheduled", False)]
    task_mods = tuple(t.dispatched[0] for t in extracted)
    tasks = tuple(Task(t.task_name, f"{structural_hash(m) & (2**64 - 1):016x}", int(t.weight), _flops(m), math.inf)
                  for t, m in zip(extracted, task_mods, strict=True))
    model = ExtractedModel(name=imported.name, mod=mod, target=target, tasks=tasks, task_mods=task_mods, level=level,
                           inputs=imported.inputs, reference_outputs=imported.reference_outputs, precision=precision,
                           samples=imported.samples)
    return model if measurer is None else measure_defaults(model, measurer)


def measure_defaults(model: ExtractedModel, measurer) -> ExtractedModel:
    """``model`` with every task's default latency measured in one batch by ``measurer``: the builds in
    parallel, then each task timed by a single call (:meth:`tunewise.tuning.measure.Measurer.measure` with ``once``),
    enough to rank the tasks and estimate the untuned model; ``inf`` where the default schedule failed. The
    default schedule is the device's (:mod:`tunewise.lowering.default_schedules`: none on a CPU, TVM's default GPU
    schedules on a GPU)."""
    from tunewise.lowering import default_schedules

    results = measurer.measure([(default_schedules.apply(m, model.target), args_info(m)) for m in model.task_mods],
                               once=True)
    return model.with_default_latencies(r.latency for r in results)
