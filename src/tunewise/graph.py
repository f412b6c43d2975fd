"""Graph-level passes, shared by task extraction and compilation so tuned records always apply.

:func:`optimize` runs the graph-level passes of a level on the imported Relax module (batch-norm folding,
decomposition for inference, and at the default level ``nhwc`` convolutions moved to NHWC data and HWIO
weights, so that output channels are innermost for the search to vectorise over); its output is the module
both extracted from and compiled. The fusion passes that follow (:func:`fusion_passes`) are exactly those
``compile_relax`` runs before it applies the database: extraction runs the same list on the same module, so
the workloads hash the same on both sides.

A level is a list of steps. The channels-last step runs only on a module with a 2-d convolution, after the
negative axes of the operators that Relax's ``ConvertLayout`` cannot remap (it fails on them with
``std::bad_alloc``) are made non-negative. A step that fails on a function leaves that function as it was
before the step, and a warning on the ``tunewise.graph`` logger says so.
"""

from __future__ import annotations

import logging

from tunewise.errors import InputError, message_line

LEVELS = ("none", "decompose", "fold-bn", "nhwc")
DEFAULT_LEVEL = "nhwc"
LAYOUT_STEP = "channels-last layout"

_log = logging.getLogger(__name__)
# operators whose ``axis`` attribute ConvertLayout cannot remap when negative; all take (x, axis, keepdims)
_REDUCTIONS = ("max", "min", "sum", "mean", "prod", "std", "variance", "argmax", "argmin")


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
    if level == "nhwc":  # output channels innermost in data and weights: the search vectorises over them
        steps.append((LAYOUT_STEP, [normalize_axes(), relax.transform.ConvertLayout(
            {"relax.nn.conv2d": ["NHWC", "HWIO"]}), relax.transform.FoldConstant()]))
    return steps


def optimize(mod, target, level: str = DEFAULT_LEVEL):
    """Run the graph-level passes of ``level`` on ``mod`` for ``target``; returns a new module."""
    import tvm

    steps = _steps(level)
    with target, tvm.transform.PassContext(opt_level=3):
        for name, passes in steps:
            if name == LAYOUT_STEP and not has_operator(mod, "relax.nn.conv2d"):
                continue
            mod = _apply_step(mod, level, name, passes)
    return mod


def _apply_step(mod, level: str, name: str, passes: list):
    """``passes`` applied to ``mod``; where they fail, function by function, keeping those they fail on."""
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
            _log.warning("graph level %s: the %s step failed on function %s (%s: %s); it stays without that step",
                         level, name, gv.name_hint, type(err).__name__, message_line(err))
            continue
        result.update(done)
    return result


def has_operator(mod, op_name: str) -> bool:
    """Whether some Relax function of ``mod`` calls the operator ``op_name`` (e.g. ``relax.nn.conv2d``)."""
    import tvm
    from tvm import relax

    found = []

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == op_name:
            found.append(expr)

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return bool(found)


def normalize_axes():
    """A module pass writing the negative axes of ``squeeze``, ``permute_dims`` and the reductions
    (``max``, ``sum``, ``argmax``...) as the non-negative axes they stand for."""
    import tvm
    from tvm import relax

    @relax.expr_functor.mutator
    class _Normalizer(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if not isinstance(call.op, tvm.ir.Op) or not call.op.name.startswith("relax."):
                return call
            name = call.op.name[len("relax."):]
            ndim = getattr(call.args[0].ty, "ndim", -1) if call.args else -1
            if ndim < 0 or name not in ("squeeze", "permute_dims", *_REDUCTIONS):
                return call
            field = "axes" if name == "permute_dims" else "axis"
            axis = getattr(call.attrs, field)
            if axis is None:
                return call
            if isinstance(axis, (int, tvm.tirx.IntImm)):
                if int(axis) >= 0:
                    return call
                normal = int(axis) % ndim
            else:
                if all(int(a) >= 0 for a in axis):
                    return call
                normal = [int(a) % ndim for a in axis]
            op = getattr(relax.op, name)
            if name in ("squeeze", "permute_dims"):
                return op(call.args[0], normal)
            return op(call.args[0], normal, bool(call.attrs.keepdims))

    @tvm.ir.transform.module_pass(opt_level=0, name="NormalizeAxes")
    def _pass(mod, _ctx):
        normalizer = _Normalizer(mod)
        for gv, func in mod.functions.items():
            if isinstance(func, relax.Function):
                normalizer.builder_.update_func(gv, normalizer.visit_expr(func))
        return normalizer.builder_.get()

    return _pass


def fusion_passes(target) -> list:
    """The lowering and fusion that ``compile_relax`` applies before its database lookup, in its order."""
    from tvm import relax

    try:
        dispatch = list(relax.pipeline.library_dispatch_passes(target))
    except (ValueError, AttributeError):
        dispatch = []
    return [*dispatch, relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(), relax.transform.FuseOps(), relax.transform.FuseTIR()]


def lower(mod, target):
    """``mod`` after :func:`fusion_passes`: one TIR function per tunable operator."""
    import tvm

    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential(fusion_passes(target))(mod)
