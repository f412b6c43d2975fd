"""Rewrites of what TVM's torch importer translates into Relax that computes something else, or that TVM cannot
compile: applied to every model imported from PyTorch (:func:`tunewise.importing.frontend.from_torch`, ``.pt2`` files)
before any graph level, so that every level starts from a module that computes what the model does.

- :func:`true_divisions` (on the exported program): ``torch.arange(8) / 8`` imports as an integer division.
- :func:`takes_from_the_front`: ``x[:, -1]`` and ``x[:, [-1, 0]]`` import as a ``take`` whose constant indices
  are negative, which TVM's gather does not wrap: it reads outside the tensor (garbage, or a crash).
- :func:`integer_clips_within_range`: linear interpolation imports with a ``clip`` of integer indices to an
  infinite bound, which TVM cannot lower for integers ("Cannot convert infinity to BigInt").
- :func:`converters`: the operators the importer has no translation for and Relax has (``amax``, ``amin``:
  ``torch.logsumexp`` exports with ``amax``; ``min`` along a dimension; ``var_mean``), handed to it.
"""

from __future__ import annotations

import math

import numpy as np

from tunewise.lowering.graph import clip_bounds
from tunewise.lowering.rewriting import rewriting_pass


def _argument(node, index: int, name: str, default):
    """The ``index``-th argument of an fx ``node``, given by position or by ``name`` (``default`` when neither)."""
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _extremum(reduce):
    """A converter of ``aten.amax``/``aten.amin`` (``x, dim=(), keepdim=False``; no ``dim``: every axis) to
    ``reduce``."""

    def convert(node, importer):
        x, dims, keep = importer.env[node.args[0]], _argument(node, 1, "dim", ()), _argument(node, 2, "keepdim", False)
        return importer.block_builder.emit(reduce(x, list(dims) or None, bool(keep)))

    return convert


def _min_along(node, importer):
    """A converter of ``aten.min.dim`` (``x, dim, keepdim=False``) to the tuple of values and indices."""
    from tvm import relax

    x, dim, keep = importer.env[node.args[0]], node.args[1], bool(_argument(node, 2, "keepdim", False))
    values = importer.block_builder.emit(relax.op.min(x, [dim], keep))
    indices = importer.block_builder.emit(relax.op.argmin(x, dim, keep))
    return importer.block_builder.emit(relax.Tuple([values, indices]))


def _variance_and_mean(node, importer):
    """A converter of ``aten.var_mean.correction`` (``x, dim=None, *, correction=1, keepdim=False``; no ``dim``:
    every axis) to the tuple of the variance, ``correction`` degrees of freedom less, and the mean."""
    from tvm import relax

    x = importer.env[node.args[0]]
    dims = _argument(node, 1, "dim", None)
    shape = [int(d) for d in node.args[0].meta["val"].shape]
    axes = list(range(len(shape))) if not dims else [d % len(shape) for d in dims]
    correction = node.kwargs.get("correction")
    correction = 1 if correction is None else correction
    keep = bool(node.kwargs.get("keepdim", False))
    count = math.prod(shape[a] for a in axes)
    variance = importer.block_builder.emit(relax.op.variance(x, axes, keep))
    if correction:
        scale = relax.const(count / (count - correction) if count > correction else math.inf, str(x.ty.dtype))
        variance = importer.block_builder.emit(relax.op.multiply(variance, scale))
    mean = importer.block_builder.emit(relax.op.mean(x, axes, keep))
    return importer.block_builder.emit(relax.Tuple([variance, mean]))


def converters() -> dict:
    """Translations of operators TVM's torch importer lacks, by the importer's operator name, for its
    ``custom_convert_map``."""
    from tvm import relax

    return {"amax.default": _extremum(relax.op.max), "amin.default": _extremum(relax.op.min),
            "min.dim": _min_along, "var_mean.correction": _variance_and_mean}


def true_divisions(ep) -> None:
    """Cast the integer tensors each ``aten.div`` of a floating-point result divides (``torch.arange(8) / 8``) to
    that result's type, in the graph of ``ep`` (a ``torch.export.ExportedProgram``)."""
    import torch

    changed = False
    for node in list(ep.graph.nodes):
        if node.op != "call_function" or node.target not in (torch.ops.aten.div.Tensor, torch.ops.aten.div.Scalar):
            continue
        result = node.meta.get("val")
        if result is None or not result.dtype.is_floating_point:
            continue
        for arg in node.args[:2]:
            value = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
            if value is not None and not value.dtype.is_floating_point:
                with ep.graph.inserting_before(node):
                    cast = ep.graph.call_function(torch.ops.aten._to_copy.default, (arg,), {"dtype": result.dtype})
                cast.meta["val"] = value.to(result.dtype)
                node.replace_input_with(arg, cast)
                changed = True
    if changed:
        ep.graph_module.recompile()


def repair(mod):
    """``mod`` (a Relax module from TVM's torch importer) with every rewrite of this module applied."""
    import tvm

    return tvm.transform.Sequential([takes_from_the_front(), integer_clips_within_range()])(mod)


def takes_from_the_front():
    """A module pass writing each ``take`` of constant negative indices on an axis of known size as the take of
    the same elements counted from the front."""
    import tvm
    from tvm import relax

    def rewrite(_builder, call):
        x, indices = call.args
        shape = getattr(x.ty, "shape", None)
        if not isinstance(indices, tvm.ir.expr.Constant) or shape is None or call.attrs.axis is None:
            return None
        values = indices.value.numpy()
        axis = int(call.attrs.axis) % len(shape)
        if not np.issubdtype(values.dtype, np.integer) or not (values < 0).any() or not hasattr(shape[axis], "value"):
            return None
        size = int(shape[axis].value)
        fronted = np.where(values < 0, values + size, values).astype(values.dtype)
        return relax.op.take(x, relax.const(fronted, str(values.dtype)), axis, call.attrs.mode)

    return rewriting_pass(("relax.take",), rewrite, "TakesFromTheFront")


def integer_clips_within_range():
    """A module pass writing ``clip(x, lo, hi)`` of an integer ``x`` with an infinite bound as ``maximum(x, lo)``,
    ``minimum(x, hi)``, or ``x``."""
    def rewrite(_builder, call):
        integer = str(call.args[0].ty.dtype).startswith(("int", "uint"))
        infinite = not all(math.isfinite(float(a.value)) for a in call.args[1:])
        return clip_bounds(call) if integer and infinite else None

    return rewriting_pass(("relax.clip",), rewrite, "IntegerClipsWithinRange")
