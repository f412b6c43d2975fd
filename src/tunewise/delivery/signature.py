"""A compiled model's inputs: names, shapes, dtypes and the ranges of index inputs, checked at every call.

At compile time :func:`describe_inputs` reads them off the Relax module that is compiled: for every integer input
that reaches the indices of a ``take`` (embeddings, ONNX ``Gather``) or a ``gather_elements`` through
value-preserving operators (casts, reshapes), the range the indices must lie in. The kernels index memory
with them unchecked (``mode="fast"``): an index outside its range reads outside the table or crashes the
process. :func:`prepare` checks a call's inputs against that description before they reach the kernels, and
converts a float or integer array to the dtype the model takes where that is safe.
"""

from __future__ import annotations

import numpy as np

from tunewise.errors import ModelInputError

# operators whose output holds the very values of their first argument
_VALUE_PRESERVING = ("astype", "reshape", "flatten", "squeeze", "expand_dims", "permute_dims", "broadcast_to")
_GATHERS = ("take", "gather_elements")  # (data, indices, axis=...)


def _static_dim(ty, axis: int) -> int | None:
    shape = getattr(ty, "shape", None)
    if shape is None or not -len(shape) <= axis < len(shape):
        return None
    dim = shape[axis]
    return int(dim) if hasattr(dim, "value") or isinstance(dim, int) else None


def _op_name(value) -> str:
    import tvm
    from tvm import relax

    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name.startswith("relax."):
        return value.op.name[len("relax."):]
    return ""


def _is_scalar_constant(expr, number: int | None = None) -> bool:
    import tvm

    if not isinstance(expr, tvm.ir.expr.Constant) or expr.value.numpy().size != 1:
        return False
    return number is None or int(expr.value.numpy().reshape(())) == number


def _index_source(expr, values: dict, params: set):
    """``(parameter, wraps_negative)`` when the indices ``expr`` are a parameter's values, possibly wrapped
    from ``[-n, 0)`` to ``[0, n)`` by ``where(x < 0, x + n, x)`` (how the ONNX importer writes ``Gather``)."""
    wraps = False
    while expr not in params:
        value = values.get(expr)
        name = _op_name(value)
        if name in _VALUE_PRESERVING:
            expr = value.args[0]
        elif name == "where" and not wraps:
            cond, shifted, plain = (values.get(a, a) for a in value.args)
            if not (_op_name(cond) == "less" and _is_scalar_constant(cond.args[1], 0)
                    and _op_name(shifted) == "add" and _is_scalar_constant(shifted.args[1])
                    and cond.args[0].same_as(value.args[2]) and shifted.args[0].same_as(value.args[2])):
                return None
            wraps, expr = True, value.args[2]
        else:
            return None
    return expr, wraps


def index_ranges(mod) -> dict[int, tuple[int, int]]:
    """For the positions of ``mod``'s ``main`` parameters used as gather indices: ``[low, high)``."""
    from tvm import relax

    main = mod["main"]
    values = relax.analysis.get_var2val(main)
    params = {p: i for i, p in enumerate(main.params)}
    ranges: dict[int, tuple[int, int]] = {}

    def visit(expr):
        if _op_name(expr) not in _GATHERS:
            return
        rows = _static_dim(expr.args[0].ty, int(expr.attrs.axis) if expr.attrs.axis is not None else 0)
        source = _index_source(expr.args[1], values, set(params))
        if rows is None or source is None:
            return
        param, wraps = source
        low, high = ranges.get(params[param], (-rows if wraps else 0, rows))
        ranges[params[param]] = (max(low, -rows if wraps else 0), min(high, rows))

    relax.analysis.post_order_visit(main, visit)
    return ranges


def describe_inputs(mod, inputs) -> list[dict]:
    """Name, shape, dtype and (for index inputs) ``index_range`` of each input of ``mod``'s ``main``, whose
    example values are ``inputs``: what the artifact's metadata records under ``"inputs"``."""
    names = [p.name for p in mod["main"].params]
    ranges = index_ranges(mod)
    described = []
    for i, x in enumerate(inputs):
        spec = {"name": names[i] if i < len(names) else f"input{i}", "shape": list(x.shape), "dtype": str(x.dtype)}
        if i in ranges:
            spec["index_range"] = list(ranges[i])
        described.append(spec)
    return described


def _name(spec: dict, i: int) -> str:
    return repr(spec["name"]) if "name" in spec else f"{i}"


def _convert(x: np.ndarray, want: np.dtype, label: str) -> np.ndarray:
    """``x`` as ``want`` when no value changes beyond float rounding; else :class:`ModelInputError`."""
    if x.dtype.kind == "f" and want.kind == "f":
        with np.errstate(over="ignore"):
            converted = x.astype(want)
        if np.array_equal(np.isfinite(converted), np.isfinite(x)):
            return converted
        raise ModelInputError(f"input {label} holds values beyond the range of {want}, which the model takes")
    if x.dtype.kind in "iub" and want.kind in "iu":
        converted = x.astype(want)
        if np.array_equal(converted, x):
            return converted
        raise ModelInputError(f"input {label} holds values that {want}, which the model takes, cannot hold")
    raise ModelInputError(f"input {label} must be {want}, got {x.dtype}")


def prepare(specs: list[dict] | None, inputs) -> list[np.ndarray]:
    """``inputs`` as contiguous arrays of the dtypes in ``specs`` (see :func:`describe_inputs`), after checking
    their number, shapes and index ranges; raises :class:`ModelInputError` with one line naming the input."""
    arrays = [np.asarray(x) for x in inputs]
    if specs is None:
        return [np.ascontiguousarray(x) for x in arrays]
    if len(arrays) != len(specs):
        names = ", ".join(_name(s, i) for i, s in enumerate(specs))
        raise ModelInputError(f"the model takes {len(specs)} input(s) ({names}), got {len(arrays)}")
    prepared = []
    for i, (x, spec) in enumerate(zip(arrays, specs, strict=True)):
        label, want = _name(spec, i), np.dtype(spec["dtype"])
        if list(x.shape) != list(spec["shape"]):
            raise ModelInputError(f"input {label} must have shape {tuple(spec['shape'])}, got {x.shape}")
        if x.dtype != want:
            x = _convert(x, want, label)
        if "index_range" in spec and x.size:
            low, high = spec["index_range"]
            bad = np.flatnonzero((x < low) | (x >= high))
            if bad.size:
                where = tuple(int(k) for k in np.unravel_index(bad[0], x.shape))
                raise ModelInputError(f"input {label} holds index {x.flat[bad[0]]} at {where}; its values must "
                                      f"lie in [{low}, {high}) (it indexes a table of {high} rows)")
        prepared.append(np.ascontiguousarray(x))
    return prepared
