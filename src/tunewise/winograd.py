"""Winograd convolutions: 3x3 channels-last convolutions of stride 1 computed as F(4x4, 3x3).

A 3x3 convolution producing a 4x4 output tile from a 6x6 input tile needs 36 multiplications per input and output
channel pair, against 144 computed directly: the tile's input is transformed (``data_pack``), multiplied with the
transformed weight in a batch of 36 matrix products (``bgemm``, where the time goes and the search tiles), and the
products transformed back (``inverse``). The weight's transform is a function of the weight alone: the graph step
(:func:`tunewise.graph.winograd_convolutions`) writes it as an operator of its own on the constant weight, which
constant folding computes once at compile time, so the tuned operator reads the transformed weight
``[6, 6, CI, CO]`` as a pre-packed constant.

The blocks carry MetaSchedule's custom rules for the two transforms (``conv2d_nhwc_winograd_data_pack``,
``conv2d_nhwc_winograd_inverse``: tile two loops, unroll the 6x6 ones) and the batch of matrix products takes the
search's multi-level tiling. The transform matrices are Cook-Toom's at TOPI's interpolation points, chosen for
float32 accuracy.
"""

from __future__ import annotations

TILE = 4  # output tile: F(4x4, 3x3)
KERNEL = 3
# narrower convolutions stay direct: the batch of matrix products has too few channels to vectorise over (the
# convolutions measured had 64 to 512)
MIN_CHANNELS = 32


def eligible(call) -> bool:
    """Whether the Relax ``conv2d`` call ``call`` can be computed as a Winograd convolution: NHWC data, HWIO
    weight, NHWC output, 3x3, stride 1, no dilation, one group, float32, a constant weight, and at least
    :data:`MIN_CHANNELS` input and output channels."""
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
    return shape[:2] == [KERNEL, KERNEL] and min(shape[2], shape[3]) >= MIN_CHANNELS


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
    top, left, bottom, right = padding
    out_height = height + top + bottom - KERNEL + 1
    out_width = width + left + right - KERNEL + 1
    tiles_h, tiles_w = -(-out_height // TILE), -(-out_width // TILE)
    tiles = batch * tiles_h * tiles_w
    a, b, _ = winograd_transform_matrices(TILE, KERNEL, str(data.dtype))
    # padded so that every tile's 6x6 window lies inside
    padded = topi.nn.pad(data, (0, top, left, 0),
                         (0, tiles_h * TILE + KERNEL - 1 - height - top,
                          tiles_w * TILE + KERNEL - 1 - width - left, 0),
                         name="data_pad", attrs={"schedule_rule": "None"})

    def tile_origin(p):
        return p // (tiles_h * tiles_w), (p // tiles_w) % tiles_h * TILE, p % tiles_w * TILE

    def window(eps, nu, p, ci):
        n, h, w = tile_origin(p)
        return padded[n, h + eps, w + nu, ci]

    tile_in = te.compute((alpha, alpha, tiles, in_channels), window, name="input_tile",
                         attrs={"schedule_rule": "None"})
    ra = te.reduce_axis((0, alpha), name="ra")
    rb = te.reduce_axis((0, alpha), name="rb")
    data_pack = te.compute(
        (alpha, alpha, tiles, in_channels),
        lambda eps, nu, p, ci: te.sum(tile_in[ra, rb, p, ci] * b[ra, eps] * b[rb, nu], axis=[ra, rb]),
        name="data_pack", attrs={"schedule_rule": "conv2d_nhwc_winograd_data_pack"})
    ci = te.reduce_axis((0, in_channels), name="ci")
    bgemm = te.compute((alpha, alpha, tiles, out_channels),
                       lambda eps, nu, p, co: te.sum(data_pack[eps, nu, p, ci] * packed[eps, nu, ci, co], axis=[ci]),
                       name="bgemm", attrs={"meta_schedule.write_cache_level": [2]})
    sa = te.reduce_axis((0, alpha), name="sa")
    sb = te.reduce_axis((0, alpha), name="sb")
    inverse = te.compute((TILE, TILE, tiles, out_channels),
                         lambda vh, vw, p, co: te.sum(bgemm[sa, sb, p, co] * a[sa, vh] * a[sb, vw], axis=[sa, sb]),
                         name="inverse", attrs={"schedule_rule": "conv2d_nhwc_winograd_inverse"})
    return te.compute(
        (batch, out_height, out_width, out_channels),
        lambda n, h, w, co: inverse[h % TILE, w % TILE, (n * tiles_h + h // TILE) * tiles_w + w // TILE, co],
        name="conv2d_winograd")
