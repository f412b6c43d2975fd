"""Depthwise convolutions, searched with a rule of ours: a row of outputs kept in vector registers.

A depthwise convolution (one input channel per output channel, channels last) does few operations per element it
reads, so it runs at the speed its loads and its epilogue allow. MetaSchedule's multi-level tiling treats it as a
convolution: the padded input copied into a buffer of its own, channel tiles of any divisor (12 lanes of 144
channels), the accumulators spread over rows. Measured on EfficientNet-B0's twelve depthwise tasks on an AVX-512
Xeon, the best of 48 or more trials of that space took 2 to 5 times as long as this rule's candidates
(``bench/modern_blocks.md``). :func:`annotate` marks each such convolution with :data:`RULE`, whose design space
(:func:`register_rules`) keeps a tile of ``t`` outputs along the width by :data:`LANES` channels in registers
while it sums the window, reads the input through the padding's condition (no padded copy), computes the fused
epilogue (bias, activation) on the tile before it is stored, and runs rows and channel tiles in parallel.
"""

from __future__ import annotations

RULE = "tunewise_depthwise"
LANES = 16  # channels a vector holds: a whole AVX-512 register, two AVX2 ones
WIDTH_TILES = (2, 4, 7, 8)  # outputs along the width kept in registers (8 at most: 8 x 16 lanes, 8 registers)


def depthwise_block(func) -> str | None:
    """The name of the depthwise convolution block of a PrimFunc: a block ``out[n, h, w, c]`` summing over a
    window and a unit reduction axis, whose weight is ``[kh, kw, 1, C]`` for the output's ``C`` channels; None
    where the function has no such block."""
    import tvm
    from tvm import s_tir

    if not isinstance(func.body, s_tir.SBlockRealize):
        return None
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    found = [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock(func.body.block.name_hint))
             if _is_depthwise(sch.get(b))]
    return found[0] if len(found) == 1 else None


def _is_depthwise(block) -> bool:
    kinds = [int(v.iter_type) for v in block.iter_vars]  # 0: spatial, 2: reduction
    if kinds != [0, 0, 0, 0, 2, 2, 2] or int(block.iter_vars[-1].dom.extent) != 1 or len(block.writes) != 1:
        return False
    (written,) = block.writes
    channels = int(written.source.shape[-1])
    weights = [r.source for r in block.reads if [int(d) for d in r.source.shape[2:]] == [1, channels]]
    return len(written.source.shape) == 4 and len(weights) == 1 and len(weights[0].shape) == 4


def annotate():
    """A module pass marking the depthwise block (:func:`depthwise_block`) of every PrimFunc that has one with
    :data:`RULE` (its ``schedule_rule``); other functions stay as they are."""
    import tvm
    from tvm import s_tir

    def transform(mod, _ctx):
        updates = {}
        for gv, func in mod.functions.items():
            name = depthwise_block(func) if isinstance(func, tvm.tirx.PrimFunc) else None
            if name is not None:
                sch = s_tir.Schedule(tvm.IRModule({"main": func}))
                sch.annotate(sch.get_sblock(name), "schedule_rule", RULE)
                updates[gv] = sch.mod["main"]
        for gv, func in updates.items():
            mod[gv] = func
        return mod

    return tvm.transform.module_pass(transform, opt_level=0, name="DepthwiseInRegisters")


def register_rules() -> None:
    """Register :data:`RULE` with MetaSchedule for CPU targets (idempotent), as every process that generates a
    design space of a marked convolution must first."""
    import tvm

    name = f"s_tir.meta_schedule.cpu.{RULE}"
    if tvm.get_global_func(name, allow_missing=True) is None:
        tvm.register_global_func(name, _schedule)


def _schedule(sch, block):
    """The design space: the width split by a tile sampled from :data:`WIDTH_TILES`, the channels by
    :data:`LANES` (or the largest power of two up to it that divides them); loops batch, row, channel tile
    (fused, parallel), width tile, then the window unrolled around the tile's outputs, which are unrolled along
    the width and vectorised along the channels; the padding inlined into the reads; the epilogue
    (:func:`_epilogue`) computed on each tile, vectorised."""
    batch, row, width, channel, unit, window_h, window_w = sch.get_loops(block)
    tile = sch.sample_categorical(list(WIDTH_TILES), [1 / len(WIDTH_TILES)] * len(WIDTH_TILES))
    width_outer, width_inner = sch.split(width, [None, tile])
    channels = int(sch.get(channel).extent)
    lanes = next(d for d in (LANES, 8, 4, 2, 1) if channels % d == 0)
    channel_outer, channel_inner = sch.split(channel, [None, lanes])
    sch.reorder(batch, row, channel_outer, width_outer, unit, window_h, window_w, width_inner, channel_inner)
    consumers = _epilogue(sch, block)
    if len(consumers) == 1:
        sch.reverse_compute_at(consumers[0], width_outer, preserve_unit_loops=True)
        epilogue_inner = sch.get_loops(consumers[0])[-1]
        sch.vectorize(sch.split(epilogue_inner, [None, lanes])[-1])
    for producer in sch.get_producers(block):  # the padding
        if _spatial(sch.get(producer)):
            sch.compute_inline(producer)
    sch.parallel(sch.fuse(batch, row, channel_outer))
    sch.vectorize(channel_inner)
    for loop in (window_h, window_w, width_inner):
        sch.unroll(loop)
    init = sch.decompose_reduction(block, unit)
    sch.vectorize(sch.get_loops(init)[-1])
    # the loops are parallel, vectorised and unrolled here: MetaSchedule's rule for the root would do it again
    sch.annotate(sch.get_sblock(sch.mod["main"].body.block.name_hint), "schedule_rule", "None")
    return [sch]


def _epilogue(sch, block) -> list:
    """The consumers of ``block`` once every spatial consumer that others read is inlined into them: one block
    computing the whole elementwise epilogue (bias, activation) where the function has one."""
    while True:
        inner = [c for c in sch.get_consumers(block) if sch.get_consumers(c) and _spatial(sch.get(c))]
        if not inner:
            return sch.get_consumers(block)
        sch.compute_inline(inner[0])


def _spatial(block) -> bool:
    return all(int(v.iter_type) == 0 for v in block.iter_vars)
