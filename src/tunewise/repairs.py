"""Rewrites of what TVM's torch importer translates into Relax that computes something else, or that TVM cannot
compile: applied to every model imported from PyTorch (:func:`tunewise.frontend.from_torch`, ``.pt2`` files)
before any graph level, so that every level starts from a module that computes what the model does.

- :func:`takes_from_the_front`: ``x[:, -1]`` and ``x[:, [-1, 0]]`` import as a ``take`` whose constant indices
  are negative, which TVM's gather does not wrap: it reads outside the tensor (garbage, or a crash).
- :func:`integer_clips_within_range`: linear interpolation imports with a ``clip`` of integer indices to an
  infinite bound, which TVM cannot lower for integers ("Cannot convert infinity to BigInt").
- :func:`converters`: the operators the importer has no translation for and Relax has (``amax``, ``amin``:
  ``torch.logsumexp`` exports with ``amax``), handed to it.
"""

from __future__ import annotations

import math

import numpy as np

from tunewise.graph import rewriting_pass


def _extremum(reduce):
    """A converter of ``aten.amax``/``aten.amin`` (``x, dim=(), keepdim=False``; no ``dim``: every axis) to
    ``reduce``."""

    def convert(node, importer):
        x = importer.env[node.args[0]]
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", ())
        keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        return importer.block_builder.emit(reduce(x, list(dims) or None, bool(keep)))

    return convert


def converters() -> dict:
    """Translations of operators TVM's torch importer lacks, by the importer's operator name, for its
    ``custom_convert_map``."""
    from tvm import relax

    return {"amax.default": _extremum(relax.op.max), "amin.default": _extremum(relax.op.min)}


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
    from tvm import relax

    def rewrite(_builder, call):
        x, (low, high) = call.args[0], (float(a.value) for a in call.args[1:])
        dtype = str(x.ty.dtype)
        if not dtype.startswith(("int", "uint")) or (math.isfinite(low) and math.isfinite(high)):
            return None
        if math.isfinite(low):
            x = relax.op.maximum(x, relax.const(int(low), dtype))
        return relax.op.minimum(x, relax.const(int(high), dtype)) if math.isfinite(high) else x

    return rewriting_pass(("relax.clip",), rewrite, "IntegerClipsWithinRange")
