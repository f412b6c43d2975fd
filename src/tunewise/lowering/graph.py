"""Graph-level passes, shared by task extraction and compilation so tuned records always apply.

:func:`optimize` runs the passes of a level (:data:`LEVELS`) on the imported Relax module; its output is the
module both extracted from and compiled, lowered alike (:func:`lower`, :func:`fusion_passes`) so workloads
hash the same on both sides, and compilation applies the database after them (:func:`compile_pipeline`).
From ``fold-bn`` on, batch norms are folded; ``nhwc`` moves convolutions to NHWC data and HWIO weights;
``prepack`` lets a tuned schedule choose its weights' layout, folded into the constants at compile time;
``winograd`` (CPU only) computes eligible 3x3 convolutions as Winograd ones (:mod:`tunewise.lowering.winograd`).
:func:`default_level` is ``winograd`` on a CPU and ``nhwc`` on a GPU (evidence: bench/studies/winograd/findings.md,
bench/studies/graph_levels/findings.md). On a CPU, lowering writes ``exp``, ``sigmoid``, ``tanh``, ``log`` and
``erf`` in arithmetic that vectorises, at every level (:func:`tir_rewrites`).

Every function of the optimised module compiles: a step that fails on a function, or leaves in it an operator
the VM cannot run (:func:`cannot_compile`), leaves it as before the step, with a warning on this module's logger;
an operator that no level compiles raises :class:`~tunewise.errors.UnsupportedOperatorError` before tuning.
"""

from __future__ import annotations

import logging
import math

from tunewise.errors import InputError, UnsupportedOperatorError, message_line
from tunewise.lowering import precision as precisions
from tunewise.lowering.rewriting import OUT_EWISE_FUSABLE, rewriting_pass

LEVELS = ("none", "decompose", "fold-bn", "nhwc", "prepack", "winograd")
LAYOUT_STEP = "channels-last layout"
WINOGRAD_STEP = "winograd"
# the steps that rewrite 2-d convolutions, skipped in a module without one
_CONVOLUTION_STEPS = (LAYOUT_STEP, WINOGRAD_STEP)

_log = logging.getLogger(__name__)
# operators whose ``axis`` attribute ConvertLayout cannot remap when negative; all take (x, axis, keepdims)
_REDUCTIONS = ("max", "min", "sum", "mean", "prod", "std", "variance", "argmax", "argmin")
# the layouts of the channels-last step: convolutions channels-last, transposed convolutions in the only layouts
# LegalizeOps lowers them in (ConvertLayout would otherwise give them the channels-last data of their input)
LAYOUTS = {"relax.nn.conv2d": ["NHWC", "HWIO"], "relax.nn.conv2d_transpose": ["NCHW", "IOHW"],
           "relax.nn.conv1d_transpose": ["NCW", "IOW"]}
# the operators the Relax VM's code generator emits itself; every other operator must have become a call of a
# function (a TIR kernel, a packed function) by the end of the compilation pipeline
VM_OPERATORS = frozenset({"relax.call_builtin_with_ctx", "relax.vm.alloc_storage", "relax.vm.alloc_tensor",
                          "relax.vm.kill_object", "relax.null_value"})


def _steps(level: str) -> list[tuple[str, list]]:
    from tvm import relax

    if level not in LEVELS:
        raise InputError(f"unknown graph level {level!r}; choose one of: {', '.join(LEVELS)}")
    if level == "none":
        return []
    decompose = [relax.transform.DecomposeOpsForInference(), relax.transform.FoldConstant()]
    if level == "decompose":
        return [("decompose", decompose)]
    steps = [("fold-bn", [relax.transform.FoldBatchnormToConv2D(), relax.transform.FoldConstant(), *decompose])]
    if _includes(level, "nhwc"):  # output channels innermost in data and weights: the search vectorises them
        steps.append((LAYOUT_STEP, [normalize_axes(), clip_as_min_max(), relax.transform.ConvertLayout(LAYOUTS),
                                    relax.transform.FoldConstant()]))
    if level == "winograd":  # after the layout step: it rewrites channels-last convolutions
        steps.append((WINOGRAD_STEP, [winograd_convolutions(), relax.transform.FoldConstant()]))
    return steps


def default_level(target) -> str:
    """The graph level a model is tuned and compiled at for ``target`` (a TVM target) unless asked otherwise:
    ``winograd`` on a CPU, ``nhwc`` on a GPU."""
    from tunewise.target import is_gpu

    return "nhwc" if is_gpu(target) else "winograd"


def optimize(mod, target, level: str, precision: str = precisions.DEFAULT):
    """Run the graph-level passes of ``level`` on ``mod`` for ``target``, then those lowering it to
    ``precision`` (:func:`tunewise.lowering.precision.steps`); returns a new module, every function of which
    compiles. Raises :class:`~tunewise.errors.UnsupportedOperatorError` on an operator that compiles at no
    level."""
    return optimize_and_lower(mod, target, level, precision)[0]


def optimize_and_lower(mod, target, level: str, precision: str = precisions.DEFAULT) -> tuple:
    """``(optimize(mod, target, level, precision), lower(...) of it)``: the module to compile and the module to
    extract tasks from."""
    import tvm

    from tunewise.target import is_gpu

    steps = _steps(level)
    at = next((i for i, (name, _) in enumerate(steps) if name == WINOGRAD_STEP), len(steps))
    steps[at:at] = precisions.steps(precision)
    if level == "winograd" and is_gpu(target):
        raise InputError(f"graph level {level!r} is for CPU targets; on a GPU choose one of: "
                         f"{', '.join(LEVELS[:LEVELS.index(level)])}")
    notes: list[str] = []  # the warnings of the steps that fell back, given for the run whose result is kept
    with target, tvm.transform.PassContext(opt_level=3):
        result = _run_steps(mod, level, steps, notes=notes)
        lowered, failing = _lower_checked(result, target, level)
        if failing:  # again, each step kept only in the functions that compile after it
            notes.clear()
            result = _run_steps(mod, level, steps, target, notes=notes)
            lowered, failing = _lower_checked(result, target, level)
        for note in notes:
            _log.warning("%s", note)
        if failing:
            raise UnsupportedOperatorError("cannot compile the model at any graph level: " + "; ".join(
                f"{reason} (function {name})" for name, reason in failing.items()))
    return result, lowered


def _run_steps(mod, level: str, steps: list, target=None, *, notes: list[str] | None = None):
    """``mod`` after ``steps``; with ``target``, each step kept only in the functions that compile after it or
    did not before it (:func:`_apply_step`)."""
    for name, passes in steps:
        if name in _CONVOLUTION_STEPS and not has_operator(mod, "relax.nn.conv2d"):
            continue
        mod = _apply_step(mod, level, name, passes, target, notes=notes)
    return mod


def _only(mod, names):
    """``mod`` with only the Relax functions named ``names`` and every function that is not a Relax function."""
    import tvm
    from tvm import relax

    return tvm.IRModule({gv: f for gv, f in mod.functions.items()
                         if gv.name_hint in names or not isinstance(f, relax.Function)}, attrs=mod.attrs)


def _apply_step(mod, level: str, name: str, passes: list, target=None, *, notes: list[str] | None = None):
    """``passes`` applied to ``mod``; where they fail, function by function, keeping those they fail on. With
    ``target``, a function that compiled before the step and does not after it (:func:`cannot_compile`) is
    kept as it was too. Each function kept is a warning on the logger, or a line appended to ``notes``."""
    import tvm

    warn = _log.warning if notes is None else (lambda text, *args: notes.append(text % args))
    result = _apply_passes(mod, level, name, passes, warn)
    if target is None:
        return result
    _, after = _lower_checked(result, target, level)
    before = _lower_checked(mod, target, level)[1] if after else {}
    kept = {}
    present = {gv.name_hint for gv in mod.functions} & {gv.name_hint for gv in result.functions}
    for function, reason in after.items():
        if function not in before and function in present:
            warn("graph level %s: after the %s step, function %s cannot compile (%s); it stays without that step",
                 level, name, function, reason)
            kept[result.get_global_var(function)] = mod[function]
    if not kept:
        return result
    functions = dict(result.functions)
    names = {gv.name_hint for gv in functions}
    functions.update({gv: f for gv, f in mod.functions.items() if gv.name_hint not in names})  # what they call
    functions.update(kept)
    return tvm.IRModule(functions, attrs=result.attrs)


def _apply_passes(mod, level: str, name: str, passes: list, warn):
    """``passes`` applied to ``mod``; where they fail, function by function, keeping those they fail on (and
    telling ``warn``, a ``logging`` style call)."""
    import tvm
    from tvm import relax

    sequential = tvm.transform.Sequential(passes)
    try:
        return sequential(mod)
    except Exception:  # TVM raises its C++ failures (std::bad_alloc among them) as several error types
        pass
    others = {gv: f for gv, f in mod.functions.items() if not isinstance(f, relax.Function)}
    result = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function):
            continue
        try:
            done = sequential(tvm.IRModule({gv: func, **others}, attrs=mod.attrs))
        except Exception as err:
            warn("graph level %s: the %s step failed on function %s (%s: %s); it stays without that step",
                 level, name, gv.name_hint, type(err).__name__, message_line(err))
            continue
        result.update(done)
    return result


def cannot_compile(mod, target, level: str) -> dict[str, str]:
    """The Relax functions of ``mod`` (an optimised module) that do not compile for ``target``, by name, each
    with the reason in a few words; empty when the whole module compiles.

    A function compiles when, lowered as extraction and compilation lower it (:func:`lower`) and then through
    the VM lowering of the target's pipeline, it calls no operator but those the VM's code generator emits
    (:data:`VM_OPERATORS`): an operator ``LegalizeOps`` has no lowering for in its form (a layout, a dtype)
    stays a high-level operator that the VM cannot run."""
    return _lower_checked(mod, target, level)[1]


def _lower_checked(mod, target, level: str) -> tuple:
    """``(lower(mod, ...), cannot_compile(mod, ...))``; the lowered module is None where lowering fails."""
    import tvm
    from tvm import relax

    try:
        lowered = lower(mod, target, level)
    except Exception as err:  # a lowering that raises (TVM's error types, or Python's from a legalization)
        functions = [gv for gv, f in mod.functions.items() if isinstance(f, relax.Function)]
        if len(functions) <= 1:
            return None, {gv.name_hint: _lowering_failure(mod[gv], err) for gv in functions}
        failing = {}
        for gv in functions:
            failing.update(_lower_checked(_only(mod, [gv.name_hint]), target, level)[1])
        return None, failing or {gv.name_hint: f"lowering fails: {message_line(err)}" for gv in functions}
    dataflow, finalizing = _backend_passes(target)
    try:
        with target, tvm.transform.PassContext(opt_level=3):
            final = tvm.transform.Sequential([*dataflow, *finalizing])(lowered)
    except Exception as err:
        return lowered, {gv.name_hint: f"VM lowering fails: {message_line(err)}"
                         for gv, f in lowered.functions.items() if isinstance(f, relax.Function)}
    failing = {}
    for gv, func in final.functions.items():
        if isinstance(func, relax.Function):
            left = sorted(_operators(func) - VM_OPERATORS)
            if left:
                failing[gv.name_hint] = (f"TVM cannot lower operator{'s' if len(left) > 1 else ''} "
                                         f"{', '.join(left)} for this target")
    return lowered, failing


def _lowering_failure(func, err: BaseException) -> str:
    """Why ``func`` (a Relax function) fails to lower with ``err``, in a few words: the operators whose own
    lowering (their ``FLegalize``) raises, tried one call at a time, named where there are such."""
    import tvm
    from tvm import relax

    calls: list = []
    relax.analysis.post_order_visit(func, lambda e: calls.append(e) if isinstance(e, relax.Call)
                                    and isinstance(e.op, tvm.ir.Op) else None)
    failing: dict[str, str] = {}
    for call in calls:
        if call.op.name in failing:
            continue
        probe = relax.BlockBuilder()
        try:
            legalize = call.op.get_attr("FLegalize")
            if legalize is None:
                continue
            with probe.function("probe", []):
                with probe.dataflow():
                    legalize(probe, call)
                    probe.emit_output(relax.const(0))
                probe.emit_func_output(relax.const(0))
        except Exception as raised:  # the legalizations raise Python's and TVM's error types
            failing[call.op.name] = message_line(raised)
    if not failing:
        return f"lowering fails: {message_line(err)}"
    return "; ".join(f"TVM cannot lower operator {op}: {why}" for op, why in failing.items())


def _operators(func) -> set[str]:
    """The names of the operators ``func`` (a Relax function) calls."""
    import tvm
    from tvm import relax

    found: set[str] = set()

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            found.add(expr.op.name)

    relax.analysis.post_order_visit(func, visit)
    return found


def has_operator(mod, op_name: str) -> bool:
    """Whether some Relax function of ``mod`` calls the operator ``op_name`` (e.g. ``relax.nn.conv2d``)."""
    from tvm import relax

    return any(op_name in _operators(f) for f in mod.functions.values() if isinstance(f, relax.Function))


def normalize_axes():
    """A module pass writing the negative axes of ``squeeze``, ``permute_dims`` and the reductions
    (``max``, ``sum``, ``argmax``...) as the non-negative axes they stand for."""
    import tvm
    from tvm import relax

    def rewrite(_builder, call):
        name = call.op.name[len("relax."):]
        ndim = getattr(call.args[0].ty, "ndim", -1)
        axis = getattr(call.attrs, "axes" if name == "permute_dims" else "axis")
        if ndim < 0 or axis is None:
            return None
        if isinstance(axis, (int, tvm.tirx.IntImm)):
            if int(axis) >= 0:
                return None
            normal = int(axis) % ndim
        else:
            if all(int(a) >= 0 for a in axis):
                return None
            normal = [int(a) % ndim for a in axis]
        op = getattr(relax.op, name)
        if name in ("squeeze", "permute_dims"):
            return op(call.args[0], normal)
        return op(call.args[0], normal, bool(call.attrs.keepdims))

    operators = tuple(f"relax.{name}" for name in ("squeeze", "permute_dims", *_REDUCTIONS))
    return rewriting_pass(operators, rewrite, "NormalizeAxes")


def clip_as_min_max():
    """A module pass writing ``clip(x, lo, hi)`` (ReLU6 and Hardtanh import as it) as ``minimum(maximum(x, lo),
    hi)`` with constants. ``ConvertLayout`` has no layout rule for ``clip`` and wraps it in transposes back to
    the original layout and forth, each a pass over the activation in memory; elementwise ``maximum`` and
    ``minimum`` take the layout of their input and fuse into the convolution's epilogue.
    """
    def rewrite(_builder, call):
        return clip_bounds(call) if str(call.args[0].ty.dtype).startswith(("float", "bfloat")) else None

    return rewriting_pass(("relax.clip",), rewrite, "ClipAsMinMax")


def clip_bounds(call):
    """A ``relax.clip(x, lo, hi)`` call as ``minimum(maximum(x, lo), hi)``, constants of ``x``'s type, each bound
    left out where it is infinite (``clamp(min=...)`` imports as a clip to infinity)."""
    from tvm import relax

    x, (low, high) = call.args[0], (float(a.value) for a in call.args[1:])
    dtype = str(x.ty.dtype)
    exact = int if dtype.startswith(("int", "uint")) else float
    if math.isfinite(low):
        x = relax.op.maximum(x, relax.const(exact(low), dtype))
    return relax.op.minimum(x, relax.const(exact(high), dtype)) if math.isfinite(high) else x


def winograd_convolutions():
    """A module pass writing each Relax ``conv2d`` that :func:`tunewise.lowering.winograd.eligible` accepts as a
    Winograd convolution (:mod:`tunewise.lowering.winograd`): the weight's transform, an operator on the constant weight
    that the next constant folding computes, and the convolution on the transformed weight, a primitive function
    that fuses with its elementwise consumers (bias, activation) as the convolution did."""
    from tunewise.lowering import winograd

    def rewrite(builder, call):
        if not winograd.eligible(call):
            return None
        padding = tuple(int(p) for p in call.attrs.padding)
        packed = builder.emit(builder.call_te(winograd.transformed_weight, call.args[1]))
        return builder.call_te(winograd.convolution, call.args[0], packed, padding,
                               primfunc_name_hint="conv2d_winograd", primfunc_attrs={"op_pattern": OUT_EWISE_FUSABLE})

    return rewriting_pass(("relax.nn.conv2d",), rewrite, "WinogradConvolutions")


def fusion_passes(target) -> list:
    """The lowering and fusion that ``compile_relax`` applies before its database lookup, in its order."""
    from tvm import relax

    try:
        dispatch = list(relax.pipeline.library_dispatch_passes(target))
    except (ValueError, AttributeError):
        dispatch = []
    return [*dispatch, relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(), relax.transform.FuseOps(), relax.transform.FuseTIR()]


def prepacks(level: str) -> bool:
    """Whether a model of graph level ``level`` runs with its weights pre-packed in the tuned layouts."""
    return _includes(level, "prepack")


def _includes(level: str, lower: str) -> bool:
    """Whether graph level ``level`` runs the steps of level ``lower``: each level is the one before it plus
    steps of its own (:data:`LEVELS`, in that order). An unknown ``level`` includes none."""
    return level in LEVELS and LEVELS.index(level) >= LEVELS.index(lower)


def lower(mod, target, level: str):
    """``mod`` after :func:`fusion_passes`: one TIR function per tunable operator (with its weights marked
    layout-free at a level that :func:`prepacks`); on a CPU above level ``none``, the concatenations whose inputs
    can be written in place so written, their kernels gone (:func:`tunewise.lowering.concat.in_place`; not yet checked
    on a GPU's default schedules); then :func:`tir_rewrites`."""
    import tvm
    from tvm import relax

    from tunewise.lowering import concat
    from tunewise.target import is_gpu

    extra = [relax.transform.AttachAttrLayoutFreeBuffers()] if prepacks(level) else []
    if _includes(level, "decompose") and not is_gpu(target):  # after the layout-free marks, which it keeps
        extra.append(concat.in_place())
    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential([*fusion_passes(target), *extra, *tir_rewrites(target)])(mod)


def tir_rewrites(target) -> list:
    """The passes :func:`lower` ends with on the TIR functions for ``target``: on an LLVM (CPU) target, ``exp``,
    ``sigmoid``, ``tanh``, ``log`` and ``erf`` written in arithmetic that LLVM vectorises
    (:func:`tunewise.lowering.transcendentals.vectorisable_transcendentals`) where it would call libm per element,
    the transposes that move the innermost axis marked for a search in tiles
    (:func:`tunewise.lowering.transposes.annotate`), the depthwise convolutions for a search of tiles held in
    registers (:func:`tunewise.lowering.depthwise.annotate`), and the costly elementwise blocks a broadcast reads
    kept from being inlined into it (:func:`tunewise.lowering.broadcasts.annotate`), after the arithmetic that
    makes them costly."""
    from tunewise.lowering import broadcasts, depthwise, transcendentals, transposes

    if target.kind.name != "llvm":
        return []
    return [transcendentals.vectorisable_transcendentals(), transposes.annotate(), depthwise.annotate(),
            broadcasts.annotate()]


def compile_pipeline(target, level: str):
    """The Relax pipeline that compiles a module of graph level ``level`` with the MetaSchedule database in
    context: :func:`lower`, the database's schedules applied to the operators it has, at a level that
    :func:`prepacks` the weight layout rewrites split out and folded into the constants, the device's default
    schedules applied to every function still unscheduled (:mod:`tunewise.lowering.default_schedules`); then the VM
    lowering of the target's default pipeline."""
    import tvm
    from tvm import relax

    from tunewise.lowering import default_schedules

    lowering, finalizing = _backend_passes(target)
    prepacking = ([split_layout_rewrites(), relax.transform.FoldConstant(),
                   relax.transform.DeadCodeElimination()] if prepacks(level) else [])

    @tvm.transform.module_pass(opt_level=3)
    def pipeline(mod, _ctx):
        mod = lower(mod, target, level)
        mod = relax.transform.MetaScheduleApplyDatabase()(mod)
        return tvm.transform.Sequential([*prepacking, *default_schedules.passes(target), *lowering,
                                         *finalizing])(mod)

    return pipeline


def split_layout_rewrites():
    """Relax's ``SplitLayoutRewritePreproc`` on the functions with layout-free weights alone: the weight layout
    rewrites of the scheduled ones split out into functions of their own (that :func:`compile_pipeline` folds
    into the constants). The pass stops with an internal error on a function without a compute block (an
    external call such as ``topk``), and only a function with layout-free weights can have a rewrite.

    TVM's pass splits the callees of ``call_tir`` only; a function called in place (``call_tir_inplace``: the
    later producers of a concatenation written in place, :mod:`tunewise.lowering.concat`) would keep its rewrite and
    re-lay its weights at every call. So each in-place call whose in-place arguments are its last ones is written
    as a ``call_tir`` of all its arguments for the pass (:func:`_in_place_marked`), and written back after it
    (:func:`_in_place_restored`)."""
    import tvm
    from tvm import relax

    @tvm.transform.module_pass(opt_level=0, name="SplitLayoutRewrites")
    def split(mod, _ctx):
        others = {gv: f for gv, f in mod.functions.items()
                  if isinstance(f, tvm.tirx.PrimFunc) and not (f.attrs and f.attrs.get("layout_free_buffers"))}
        done = relax.transform.SplitLayoutRewritePreproc()(_in_place_marked(
            tvm.IRModule({gv: f for gv, f in mod.functions.items() if gv not in others}, attrs=mod.attrs)))
        done.update(tvm.IRModule(others))
        return _in_place_restored(done)

    return split


def _in_place_marked(mod):
    """``mod`` with each ``call_tir_inplace`` whose in-place arguments are its last ones, one an output, written as
    the ``call_tir`` of the same function on the same arguments: a call with as many arguments as its function has
    parameters, which no ``call_tir`` of a compiled module has (its outputs are parameters after its arguments).
    Only for :func:`_in_place_restored` to write back: not a module to run."""
    from tvm import relax

    def mark(_builder, call):
        if len(call.args) != 2 or not isinstance(call.args[1], relax.Tuple):  # symbolic arguments: left alone
            return None
        count = len(call.args[1].fields)
        indices = [int(i) for i in call.attrs.inplace_indices]
        if indices != list(range(count - len(indices), count)):
            return None
        return relax.call_tir(call.args[0], call.args[1], call.ty_args[0])

    return rewriting_pass(("relax.call_tir_inplace",), mark, "InPlaceMarked")(mod)


def _in_place_restored(mod):
    """``mod`` with each ``call_tir`` that :func:`_in_place_marked` wrote (one with as many arguments as its TIR
    function has parameters) written back as the ``call_tir_inplace`` of its function, its last arguments, one an
    output, in place."""
    import tvm
    from tvm import relax

    def restore(_builder, call):
        callee = mod.functions.get(call.args[0]) if isinstance(call.args[0], tvm.ir.GlobalVar) else None
        if (len(call.args) != 2 or not isinstance(callee, tvm.tirx.PrimFunc)
                or len(callee.params) != len(call.args[1].fields)):
            return None
        ty = call.ty_args[0]
        outputs = len(ty.fields) if isinstance(ty, relax.TupleType) else 1
        count = len(call.args[1].fields)
        return relax.call_tir_inplace(call.args[0], call.args[1], list(range(count - outputs, count)),
                                      list(ty.fields) if isinstance(ty, relax.TupleType) else ty)

    return rewriting_pass(("relax.call_tir",), restore, "InPlaceRestored")(mod)


def _backend_passes(target) -> tuple[list, list]:
    """The dataflow-lowering and finalizing passes of ``target``'s default Relax pipeline. TVM 0.27's CPU
    backend package does not export its dataflow-lowering passes, so the dispatcher fails on CPU targets: they
    are then taken from the backend's pipeline module."""
    from tvm import relax

    try:
        return relax.pipeline.dataflow_lower_passes(target), relax.pipeline.finalize_passes(target)
    except (ValueError, AttributeError):
        from tvm.relax.backend.cpu_generic import pipeline as cpu

        return cpu.dataflow_lower_passes(target), cpu.finalize_passes(target)
