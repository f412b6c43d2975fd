"""Transposes in tiles: a layout change that moves a tensor's innermost axis, searched with a rule of ours.

A transpose such as channels-last to channels-first (``out[n, c, h, w] = in[n, h, w, c]``) reads along one axis
and writes along another. MetaSchedule's CPU rules fuse its loops and vectorise the output's innermost axis, so
every vector lane reads from another row of the input: measured on an AVX-512 Xeon, 64x111x111 floats took
1.39 ms that way and 0.16 ms in 8x8 tiles (``bench/modern_blocks.md``). :func:`annotate` marks each function that
is one such transpose with :data:`RULE`, whose design space (:func:`register_rules`) tiles the two axes by 8 or
16, unrolls the input's axis within a tile and vectorises the output's, the outer loops in parallel.
"""

from __future__ import annotations

RULE = "tunewise_transpose"
TILES = (8, 16)


def moved_axis(func) -> int | None:
    """The position among the output's axes of the input's innermost axis, for a PrimFunc that is one block
    copying a tensor to a permutation of its axes where that axis is not the output's innermost; else None."""
    import tvm
    from tvm import tirx

    block = _only_block(func)
    if block is None or not isinstance(block.body, tirx.BufferStore):
        return None
    store = block.body
    load = store.value
    variables = [v.var for v in block.iter_vars]
    spatial = all(int(v.iter_type) == 0 for v in block.iter_vars)
    if (not isinstance(load, tvm.ir.expr.TensorLoad) or not spatial
            or not 2 <= len(variables) == len(store.indices) == len(load.indices)):
        return None
    written, read = list(store.indices), list(load.indices)
    if not all(any(i.same_as(v) for i in written) and any(i.same_as(v) for i in read) for v in variables):
        return None
    position = next(k for k, i in enumerate(written) if i.same_as(read[-1]))
    return None if position == len(written) - 1 else position


def _only_block(func):
    """The one block inside ``func``'s root block, under its loops; None where there are others or none."""
    from tvm import s_tir, tirx

    if not isinstance(func.body, s_tir.SBlockRealize):
        return None
    body = func.body.block.body
    while isinstance(body, tirx.For):
        body = body.body
    return body.block if isinstance(body, s_tir.SBlockRealize) else None


def annotate():
    """A module pass marking every PrimFunc of :func:`moved_axis` with :data:`RULE` (its block's
    ``schedule_rule``); other functions stay as they are."""
    import tvm
    from tvm import s_tir

    def transform(mod, _ctx):
        updates = {}
        for gv, func in mod.functions.items():
            if isinstance(func, tvm.tirx.PrimFunc) and moved_axis(func) is not None:
                sch = s_tir.Schedule(tvm.IRModule({"main": func}))
                sch.annotate(sch.get_sblock(_only_block(func).name_hint), "schedule_rule", RULE)
                updates[gv] = sch.mod["main"]
        for gv, func in updates.items():
            mod[gv] = func
        return mod

    return tvm.transform.module_pass(transform, opt_level=0, name="TiledTransposes")


def register_rules() -> None:
    """Register :data:`RULE` with MetaSchedule for CPU targets (idempotent), as every process that generates a
    design space of a marked transpose must first."""
    import tvm

    name = f"s_tir.meta_schedule.cpu.{RULE}"
    if tvm.get_global_func(name, allow_missing=True) is None:
        tvm.register_global_func(name, _schedule)


def _schedule(sch, block):
    """The design space: the moved axis and the output's innermost split by tiles of :data:`TILES` (an axis no
    longer than a tile kept whole), the other axes and the moved axis's tiles fused and parallel, then the
    innermost axis's tiles; within a tile the moved axis unrolled, the innermost vectorised."""
    func = sch.mod["main"]
    loops = sch.get_loops(block)
    moved, innermost = loops[moved_axis(func)], loops[-1]
    parts = []
    for loop in (moved, innermost):
        extent = int(sch.get(loop).extent)
        if extent <= min(TILES):
            parts.append((None, loop))
            continue
        tile = sch.sample_categorical(list(TILES), [1 / len(TILES)] * len(TILES))
        parts.append(tuple(sch.split(loop, [None, tile])))
    (moved_outer, moved_inner), (inner_outer, inner_inner) = parts
    others = [loop for loop in loops if not loop.same_as(moved) and not loop.same_as(innermost)]
    outer = [*others, moved_outer] if moved_outer is not None else others
    sch.reorder(*outer, *([inner_outer] if inner_outer is not None else []), moved_inner, inner_inner)
    if outer:
        sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])
    sch.unroll(moved_inner)
    sch.vectorize(inner_inner)
    return [sch]
