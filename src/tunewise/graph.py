"""Graph-level passes, shared by task extraction and compilation so tuned records always apply.

:func:`optimize` runs the graph-level passes of a level on the imported Relax module (batch-norm folding,
decomposition for inference, and at the default level ``nhwc`` convolutions moved to NHWC data and HWIO
weights, so that output channels are innermost for the search to vectorise over); its output is the module
both extracted from and compiled. The fusion passes that follow (:func:`fusion_passes`) are exactly those
``compile_relax`` runs before it applies the database: extraction runs the same list on the same module, so
the workloads hash the same on both sides.
"""

from __future__ import annotations

from tunewise.errors import InputError

LEVELS = ("none", "decompose", "fold-bn", "nhwc")
DEFAULT_LEVEL = "nhwc"


def _graph_passes(level: str) -> list:
    from tvm import relax

    if level == "none":
        return []
    if level == "decompose":
        return [relax.transform.DecomposeOpsForInference(), relax.transform.FoldConstant()]
    fold_bn = [relax.transform.FoldBatchnormToConv2D(), relax.transform.FoldConstant(),
               relax.transform.DecomposeOpsForInference(), relax.transform.FoldConstant()]
    if level == "fold-bn":
        return fold_bn
    if level == "nhwc":  # output channels innermost in data and weights: the search vectorises over them
        return [*fold_bn, relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "HWIO"]}),
                relax.transform.FoldConstant()]
    raise InputError(f"unknown graph level {level!r}; choose one of: {', '.join(LEVELS)}")


def optimize(mod, target, level: str = DEFAULT_LEVEL):
    """Run the graph-level passes of ``level`` on ``mod`` for ``target``; returns a new module."""
    import tvm

    passes = _graph_passes(level)
    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential(passes)(mod) if passes else mod


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
