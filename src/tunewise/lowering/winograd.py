"""Winograd convolutions: 3x3 channels-last convolutions of stride 1 computed as F(4x4, 3x3).

A 4x4 output tile from a 6x6 input tile takes 36 multiplications per channel pair, against 144 directly: the
tile's input is transformed (``data_pack``), multiplied with the transformed weight in a batch of 36 matrix
products (``bgemm``, which the search tiles), and the products transformed back (``inverse``). The graph step
(:func:`tunewise.lowering.graph.winograd_convolutions`) writes the weight's transform as an operator on the
constant weight, folded once at compile time, so the tuned operator reads ``[6, 6, CI, CO]`` pre-packed.

Each transform ``M^T X M`` (``B``, 6x6, for the input; ``A``, 6x4, for the output) is two small products, the
rows' then the columns'. MetaSchedule has no rule for such a pair, so they carry one of ours
(:data:`TRANSFORM_RULE`, :func:`register_rules`): tiles and outer channels outermost, for parallelising; the
6-long loops unrolled and the inner channels vectorised; the matrices small buffers, not constants folded in
every candidate's build. The transform matrices are Cook-Toom's at TOPI's interpolation points.
"""

from __future__ import annotations

TILE = 4  # output tile: F(4x4, 3x3)
KERNEL = 3
# narrower convolutions stay direct: the batch of matrix products has too few channels to vectorise over (the
# convolutions measured had 64 to 512)
MIN_CHANNELS = 32
# nor do convolutions of fewer output tiles: the transformed weight is four times the direct one, and each of its
# elements serves only as many products as there are tiles (tuned for ResNet-18 in one run each, its 512-channel
# 7x7 convolutions, four tiles, were no faster as Winograd kernels than direct; its 256-channel 14x14 ones,
# 16 tiles, were faster)
MIN_TILES = 16
# the name of the transforms' MetaSchedule rule (:func:`register_rules`)
TRANSFORM_RULE = "tunewise_winograd_transform"


def eligible(call) -> bool:
    """Whether the Relax ``conv2d`` call ``call`` can be computed as a Winograd convolution: NHWC data, HWIO
    weight, NHWC output, 3x3, stride 1, no dilation, one group, float32, a constant weight, at least
    :data:`MIN_CHANNELS` input and output channels, and at least :data:`MIN_TILES` 4x4 output tiles (a static
    output shape)."""
    import tvm

    attrs = call.attrs
    weight = call.args[1]
    if not isinstance(weight, tvm.ir.expr.Constant):
        return False
    if (attrs.data_layout, attrs.kernel_layout, attrs.out_layout) != ("NHWC", "HWIO", "NHWC"):
        return False
    if int(attrs.groups) != 1 or [int(s) for s in attrs.strides] != [1, 1]:
        return False
    if [int(d) for d in attrs.dilation] != [1, 1]:
        return False
    # an unset output type is the input's
    if str(call.args[0].ty.dtype) != "float32" or str(attrs.out_dtype) not in ("float32", "None", ""):
        return False
    shape = [int(d) for d in weight.value.shape]
    if shape[:2] != [KERNEL, KERNEL] or min(shape[2], shape[3]) < MIN_CHANNELS:
        return False
    data = getattr(call.args[0].ty, "shape", None)
    if data is None or not all(isinstance(d, tvm.tirx.IntImm) for d in data):
        return False
    batch, height, width, _ = (int(d) for d in data)
    _, _, tiles_h, tiles_w = _output_tiles(height, width, tuple(int(p) for p in attrs.padding))
    return batch * tiles_h * tiles_w >= MIN_TILES


def _output_tiles(height: int, width: int, padding) -> tuple[int, int, int, int]:
    """``(out_height, out_width, tiles_h, tiles_w)`` of the convolution of a ``height`` x ``width`` input padded
    by ``padding`` (``(top, left, bottom, right)``): its output and the 4x4 tiles that cover it."""
    top, left, bottom, right = padding
    out_height, out_width = height + top + bottom - KERNEL + 1, width + left + right - KERNEL + 1
    return out_height, out_width, -(-out_height // TILE), -(-out_width // TILE)


def transformed_weight(weight):
    """The TE tensor ``[6, 6, CI, CO]`` of the HWIO 3x3 ``weight`` transformed: ``G w G^T`` per channel pair."""
    from tvm import te
    from tvm.topi.nn.winograd_util import winograd_transform_matrices

    _, _, in_channels, out_channels = (int(d) for d in weight.shape)
    alpha = TILE + KERNEL - 1
    _, _, g = winograd_transform_matrices(TILE, KERNEL, str(weight.dtype))
    kh = te.reduce_axis((0, KERNEL), name="kh")
    kw = te.reduce_axis((0, KERNEL), name="kw")
    return te.compute((alpha, alpha, in_channels, out_channels),
                      lambda eps, nu, ci, co: te.sum(weight[kh, kw, ci, co] * g[eps, kh] * g[nu, kw], axis=[kh, kw]),
                      name="winograd_weight")


def convolution(data, packed, padding):
    """The NHWC convolution of ``data`` with the transformed weight ``packed`` (:func:`transformed_weight`),
    ``padding`` as ``(top, left, bottom, right)``; a TE tensor of the convolution's output."""
    from tvm import te, topi
    from tvm.topi.nn.winograd_util import winograd_transform_matrices

    batch, height, width, in_channels = (int(d) for d in data.shape)
    alpha, _, _, out_channels = (int(d) for d in packed.shape)
    top, left, _, _ = padding
    out_height, out_width, tiles_h, tiles_w = _output_tiles(height, width, padding)
    tiles = batch * tiles_h * tiles_w
    a, b, _ = winograd_transform_matrices(TILE, KERNEL, str(data.dtype))
    # padded so that every tile's 6x6 window lies inside
    padded = topi.nn.pad(data, (0, top, left, 0),
                         (0, tiles_h * TILE + KERNEL - 1 - height - top,
                          tiles_w * TILE + KERNEL - 1 - width - left, 0),
                         name="data_pad", attrs={"schedule_rule": "None"})

    def window(row, col, p, ci):
        n, h, w = p // (tiles_h * tiles_w), (p // tiles_w) % tiles_h * TILE, p % tiles_w * TILE
        return padded[n, h + row, w + col, ci]

    data_pack = _transform(window, b, (tiles, in_channels), "data_pack")
    ci = te.reduce_axis((0, in_channels), name="ci")
    bgemm = te.compute((alpha, alpha, tiles, out_channels),
                       lambda eps, nu, p, co: te.sum(data_pack[eps, nu, p, ci] * packed[eps, nu, ci, co], axis=[ci]),
                       name="bgemm")
    inverse = _transform(lambda row, col, p, co: bgemm[row, col, p, co], a, (tiles, out_channels), "inverse")
    return te.compute(
        (batch, out_height, out_width, out_channels),
        lambda n, h, w, co: inverse[h % TILE, w % TILE, (n * tiles_h + h // TILE) * tiles_w + w // TILE, co],
        name="conv2d_winograd")


def _transform(tile, matrix, shape, name):
    """``M^T X M`` for each tile ``X`` (``tile(row, col, p, c)``: entry ``(row, col)`` of tile ``p`` in channel
    ``c``) and the constant matrix ``M`` (``matrix``, a TE tensor ``[6, k]``), a tensor ``[k, k, *shape]``; two
    blocks, the rows' products (``{name}_rows``) and the columns' (``{name}``, which carries
    :data:`TRANSFORM_RULE`)."""
    from tvm import te

    size, outputs = (int(d) for d in matrix.shape)
    i = te.reduce_axis((0, size), name="i")
    rows = te.compute((outputs, size, *shape), lambda r, col, p, c: te.sum(matrix[i, r] * tile(i, col, p, c), axis=i),
                      name=f"{name}_rows", attrs={"schedule_rule": "None"})
    j = te.reduce_axis((0, size), name="j")
    return te.compute((outputs, outputs, *shape),
                      lambda r, col, p, c: te.sum(rows[r, j, p, c] * matrix[j, col], axis=j),
                      name=name, attrs={"schedule_rule": TRANSFORM_RULE})


def register_rules() -> None:
    """Register :data:`TRANSFORM_RULE` with MetaSchedule for CPU targets (idempotent): a design space that holds
    a Winograd convolution needs it, so every process that generates one calls this first."""
    import tvm

    name = f"s_tir.meta_schedule.cpu.{TRANSFORM_RULE}"
    if tvm.get_global_func(name, allow_missing=True) is None:
        tvm.register_global_func(name, _schedule_transform)


def _schedule_transform(sch, block):
    """The design space of a transform's columns block (loops: the two output axes, the tile, the channel, the
    reduction): tiles and an outer part of the channels outermost (the postprocessing parallelises them); the
    rows' block computed there; in both blocks the 6-long loops unrolled and the inner channels vectorised."""
    (rows,) = [b for b in sch.get_producers(block) if sch.get(b).name_hint.endswith("_rows")]
    row, col, tile, channel, reduction = sch.get_loops(block)
    outer, inner = sch.split(channel, sch.sample_perfect_tile(channel, n=2, max_innermost_factor=16))
    sch.reorder(tile, outer, row, col, reduction, inner)
    sch.compute_at(rows, outer, preserve_unit_loops=True)
    row_r, col_r, _, inner_r, reduction_r = sch.get_loops(rows)[-5:]
    sch.reorder(row_r, col_r, reduction_r, inner_r)
    for loop in (row, col, reduction, row_r, col_r, reduction_r):
        sch.unroll(loop)
    sch.vectorize(inner)
    sch.vectorize(inner_r)
    return [sch]
