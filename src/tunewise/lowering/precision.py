"""The precision a model is tuned and compiled in (:data:`PRECISIONS`), what each needs of the target, and the
graph step that lowers a model to it.

``float32`` (the default) leaves the model as imported. ``bfloat16`` (a CPU with AMX) computes each matrix
product and convolution (one group, channels-last) whose right operand is a constant weight on AMX tiles
(:mod:`tunewise.lowering.amx`): the weight rounded to bfloat16 and laid out in panels once, at compile time; the
activation rounded to bfloat16 just before the product (a cast that fuses into the kernel producing it, or a
convolution's gathering of its input patches); the sums accumulated and returned in float32; so do the products
of two activations in whole blocks (attention's, at sequence lengths that are multiples of 32). Everything else
(normalisations, softmax, depthwise convolutions, elementwise arithmetic) stays float32, so rounding enters only
where the products' inputs are read. Its step runs before the Winograd step, which it leaves the convolutions it
does not take.

A compiled model is checked against the framework's float32 outputs within its precision's tolerance
(:func:`tunewise.tuning.kernel_checks.tolerance`).
"""

from __future__ import annotations

from tunewise.errors import InputError, TargetError

PRECISIONS = ("float32", "bfloat16", "float16")
DEFAULT = "float32"
BFLOAT16_STEP = "bfloat16 products"

BFLOAT16_TOLERANCE = 0.25
"""The largest error a bfloat16 model's output element may have, as a fraction of the largest magnitude of that
output in float32. bfloat16 keeps 8 significant bits: each product's inputs are rounded by up to 2^-9 of
themselves, and a network adds such errors layer after layer, more the deeper it is. Measured against the
framework's float32 on 9 inputs (bench/precision.md): a 6-layer encoder 0.7 %, a 50-layer ResNet with random
weights 15.2 %; OpenVINO's bfloat16 on them 1.7 % and 14.3 % (bench/studies/bfloat16/findings.md). A kernel
that computes something else errs by the order of the output's scale itself; the summary states the error and
a classifier's arg-max agreement beside it."""


def check(precision: str, target) -> None:
    """Raise, with a one-line message, unless ``target`` (a ``tvm.target.Target``) can compute in ``precision``:
    :class:`InputError` for an unknown name, :class:`TargetError` naming what the target lacks."""
    from tvm.target import codegen

    from tunewise.target import AMX_BF16

    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}; choose one of: {', '.join(PRECISIONS)}")
    if precision == "float16":
        raise TargetError("precision float16 is for GPU tensor cores, which tunewise does not tune in float16 yet; "
                          "on a CPU with AMX choose bfloat16")
    if precision == "bfloat16":
        if target.kind.name != "llvm":
            raise TargetError(f"precision bfloat16 is for CPUs with AMX; target {target.kind.name} is not one")
        missing = [f for f in AMX_BF16 if f not in set(codegen.llvm_get_cpu_features(target))]
        if missing:
            raise TargetError(f"precision bfloat16 needs a CPU with AMX tiles for bfloat16, and this target lacks "
                              f"{', '.join(missing)} (its CPU: {target.attrs.get('mcpu', 'generic')})")


def steps(precision: str) -> list[tuple[str, list]]:
    """The graph steps (name, passes) that lower a float32 model to ``precision``, after the graph level's. For
    bfloat16 the AMX intrinsics of every depth are registered first: a resumed run, a compilation from stored
    records or a transfer applies records whose search ran in another process."""
    from tvm import relax

    from tunewise.lowering import amx

    if precision == "bfloat16":
        amx.register_intrinsics()
        return [(BFLOAT16_STEP, [bfloat16_products(), relax.transform.FoldConstant()])]
    return []


def _static_shape(expr) -> list[int] | None:
    """The shape of a Relax expression as integers; ``None`` where it has none or a symbolic dimension."""
    import tvm

    shape = list(getattr(expr.ty, "shape", None) or [])
    if not shape or any(not isinstance(d, tvm.tirx.IntImm) for d in shape):
        return None
    return [int(d) for d in shape]


def eligible(call) -> bool:
    """Whether a Relax ``matmul`` or ``conv2d`` computes on AMX at precision bfloat16: float32; a matmul of an
    activation of two or more dimensions by a constant matrix, or of two activations of the same batch
    dimensions whose rows, depth and columns are multiples of the intrinsic's block (:func:`_products_of_two`);
    a convolution of one group by a constant weight, NHWC data, HWIO weights and NHWC output (at graph levels
    from ``nhwc`` on). A constant's rows, depth and columns that are not whole blocks are padded with zeros
    (:func:`bfloat16_products`)."""
    import tvm

    x, weight = call.args[:2]
    shape = _static_shape(x)
    if shape is None or str(x.ty.dtype) != "float32" or str(weight.ty.dtype) != "float32":
        return False
    constant = isinstance(weight, tvm.ir.expr.Constant)
    if call.op.name == "relax.matmul":
        if not constant:
            return _products_of_two(shape, _static_shape(weight))
        return len(shape) >= 2 and len(weight.ty.shape) == 2
    attrs = call.attrs
    layouts = (attrs.data_layout, attrs.kernel_layout, attrs.out_layout)
    return constant and int(attrs.groups) == 1 and layouts == ("NHWC", "HWIO", "NHWC") and str(attrs.out_dtype) in (
        "float32", "None", "")


def _products_of_two(left: list[int], right: list[int] | None) -> bool:
    """Whether ``left @ right`` (static shapes, the same batch dimensions) is a batch of products in whole
    blocks of the intrinsic: an attention's ``Q @ K^T`` and ``P @ V`` at sequence lengths that are multiples
    of 32."""
    from tunewise.lowering.amx import BLOCK, STEP

    if right is None or len(left) != len(right) or len(left) < 3 or left[:-2] != right[:-2]:
        return False
    (rows, depth), columns = left[-2:], right[-1]
    return right[-2] == depth and rows % BLOCK == 0 and depth % STEP == 0 and columns % BLOCK == 0


def _padded(size: int, multiple: int) -> int:
    return -(-size // multiple) * multiple


def convolution_output(shape, kernel, strides, padding, dilation, channels: int) -> list[int]:
    """The NHWC output shape of a convolution of NHWC ``shape`` with a ``kernel`` (height, width) of ``channels``
    outputs, ``strides``, ``padding`` (top, left, bottom, right) and ``dilation``."""
    batch, height, width, _ = shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilation
    top, left, bottom, right = padding
    return [batch, (height + top + bottom - dh * (kh - 1) - 1) // sh + 1,
            (width + left + right - dw * (kw - 1) - 1) // sw + 1, channels]


def patches(x, kernel: tuple[int, int], strides, padding, dilation, rows: int, depth: int):
    """The TE tensor of the bfloat16 rows an NHWC convolution multiplies its HWIO weight (as a ``(KH * KW * CI,
    CO)`` matrix) by: row ``(n, oh, ow)``, column ``(r, s, c)`` holds ``x[n, oh * sh + r * dh - top, ow * sw + s *
    dw - left, c]`` (zero outside ``x``), zero-padded to ``rows`` rows and ``depth`` columns (multiples of the
    intrinsic's block and step): a matrix whose view in pairs is the product's left operand, each row written
    contiguously (vectorised)."""
    from tvm import te, tirx

    batch, height, width, channels = (int(d) for d in x.shape)
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilation
    top, left = padding[:2]
    _, out_h, out_w, _ = convolution_output([batch, height, width, channels], kernel, strides, padding, dilation, 0)
    count, columns = batch * out_h * out_w, kh * kw * channels

    def value(m, k):
        n, oh, ow = m // (out_h * out_w), m // out_w % out_h, m % out_w
        r, s, c = k // (kw * channels), k // channels % kw, k % channels
        h, w = oh * sh + r * dh - top, ow * sw + s * dw - left
        inside = tirx.all(m < count, k < columns, h >= 0, h < height, w >= 0, w < width)
        return tirx.if_then_else(inside, x[n, tirx.min(tirx.max(h, 0), height - 1),
                                           tirx.min(tirx.max(w, 0), width - 1), c].astype("bfloat16"),
                                 tirx.const(0, "bfloat16"))

    return te.compute((rows, depth), value, name="patches")


def bfloat16_products():
    """A module pass writing each :func:`eligible` ``matmul`` and ``conv2d`` as the AMX product of
    :func:`tunewise.lowering.amx.product`, its rows, depth and columns padded to whole blocks with zeros: a
    matmul's activation cast to bfloat16 and read in pairs (a view), a convolution's rows gathered by
    :func:`patches`; the weight in panels (:func:`tunewise.lowering.amx.panels`, a constant); the result sliced
    to the operator's rows and columns and viewed in its output's shape (a reshape fused into the kernels
    around it would make them gather). A pointwise convolution (1 x 1, stride 1, no
    padding) reads its input as its rows, as a matmul does."""
    import numpy as np
    import tvm
    from tvm import relax

    from tunewise.lowering import amx
    from tunewise.lowering.rewriting import OUT_EWISE_FUSABLE, rewriting_pass

    def rewrite(builder, call):
        if not eligible(call):
            return None
        x, weight = call.args[:2]
        if not isinstance(weight, tvm.ir.expr.Constant):
            return products_of_two(builder, x, weight)
        shape, matrix = _static_shape(x), weight.value.numpy()
        attrs, gathered = call.attrs, False
        if call.op.name == "relax.matmul":
            out_shape = [*shape[:-1], matrix.shape[1]]
        else:
            kernel, strides, padding, dilation = (tuple(int(d) for d in v) for v in (
                matrix.shape[:2], attrs.strides, attrs.padding, attrs.dilation))
            out_shape = convolution_output(shape, kernel, strides, padding, dilation, matrix.shape[-1])
            matrix = matrix.reshape(-1, matrix.shape[-1])
            gathered = (kernel, strides, any(padding)) != ((1, 1), (1, 1), False)  # else its input is its rows
        (depth, columns), rows = matrix.shape, int(np.prod(out_shape[:-1]))
        padded = (_padded(rows, amx.BLOCK), _padded(depth, amx.STEP), _padded(columns, amx.BLOCK))
        if not gathered:  # cast in its own shape, then viewed: a reshape in the cast's kernel would gather
            lhs = relax.op.astype(x, "bfloat16")
            if padded[:2] != (rows, depth):
                lhs = relax.op.nn.pad(relax.op.reshape(lhs, (rows, depth)), [0, padded[0] - rows, 0, padded[1] - depth])
        else:
            lhs = builder.call_te(patches, x, kernel, strides, padding, dilation, padded[0], padded[1],
                                  primfunc_name_hint="patches_bf16")
        pairs = builder.emit(relax.op.memory.view(builder.emit(lhs), (padded[0], padded[1] // 2, 2)))
        full = np.zeros(padded[1:], np.float32)
        full[:depth, :columns] = matrix
        product = builder.emit(builder.call_te(amx.product, pairs, relax.const(tvm.runtime.tensor(amx.panels(full))),
                                               primfunc_name_hint="matmul_bf16",
                                               primfunc_attrs={"op_pattern": OUT_EWISE_FUSABLE}))
        if (padded[0], padded[2]) != (rows, columns):
            product = builder.emit(relax.op.strided_slice(product, [0, 1], [0, 0], [rows, columns]))
        return product if len(out_shape) == 2 else relax.op.memory.view(product, out_shape)

    return rewriting_pass(("relax.matmul", "relax.nn.conv2d"), rewrite, "BFloat16Products")


def products_of_two(builder, left, right):
    """The batch of AMX products ``left @ right`` of two float32 activations (:func:`_products_of_two`), emitted
    with ``builder``: ``left`` cast to bfloat16 and viewed in pairs, ``right`` laid out in panels
    (:func:`tunewise.lowering.amx.to_panels`, a kernel of its own or fused into the one producing it)."""
    from tvm import relax

    from tunewise.lowering import amx
    from tunewise.lowering.rewriting import OUT_EWISE_FUSABLE

    *batch, rows, depth = _static_shape(left)
    pairs = builder.emit(relax.op.memory.view(builder.emit(relax.op.astype(left, "bfloat16")),
                                              (*batch, rows, depth // 2, 2)))
    panels = builder.emit(builder.call_te(amx.to_panels, right, primfunc_name_hint="panels_bf16"))
    return builder.call_te(amx.product, pairs, panels, primfunc_name_hint="batch_matmul_bf16",
                           primfunc_attrs={"op_pattern": OUT_EWISE_FUSABLE})
