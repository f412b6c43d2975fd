"""Elementwise work computed once before a broadcast, not once for every element the broadcast makes.

Squeeze-and-excitation ends in ``x * sigmoid(gate)``: the gate holds one value a channel, ``x`` a whole feature
map. MetaSchedule's ``AutoInline`` inlines the sigmoid into the product, so every element of the map computes its
channel's sigmoid again (EfficientNet's 56x56x144 map: 3136 times each). :func:`annotate` marks such a block, one
of at least :data:`MIN_OPERATIONS` arithmetic operations whose consumer writes more elements than it does, with
no MetaSchedule rule (``schedule_rule = "None"``): neither inlined nor computed inside the broadcast's loops, it
stays a block of its own, computed once on the gate (or in the loops of the operator producing the gate).
"""

from __future__ import annotations

MIN_OPERATIONS = 8  # a bias or a scale is cheaper inlined than stored and loaded again; a sigmoid is not


def operations(expr) -> int:
    """The arithmetic operations (binary operations, calls, casts, selects) of a TIR expression."""
    import tvm
    from tvm.ir.prim import expr as prim

    if isinstance(expr, tvm.ir.expr.Call):
        return 1 + sum(operations(a) for a in expr.args)
    if isinstance(expr, prim.Select):
        return 1 + operations(expr.condition) + operations(expr.true_value) + operations(expr.false_value)
    if isinstance(expr, prim.Cast):
        return 1 + operations(expr.value)
    if isinstance(expr, prim.BinaryOpExpr | prim.CmpExpr):
        return 1 + operations(expr.a) + operations(expr.b)
    return 0


def broadcast_producers(func) -> list[str]:
    """The names of the blocks of a PrimFunc that :func:`annotate` marks."""
    import math

    import tvm
    from tvm import s_tir

    if not isinstance(func.body, s_tir.SBlockRealize):
        return []
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))

    def elements(block) -> int:
        return math.prod(int(d) for d in block.writes[0].source.shape) if len(block.writes) == 1 else 0

    marked = []
    for rv in sch.get_child_blocks(sch.get_sblock(func.body.block.name_hint)):
        block = sch.get(rv)
        if (not isinstance(block.body, tvm.tirx.BufferStore) or any(int(v.iter_type) != 0 for v in block.iter_vars)
                or operations(block.body.value) < MIN_OPERATIONS):
            continue
        if any(elements(sch.get(c)) > elements(block) for c in sch.get_consumers(rv)):
            marked.append(block.name_hint)
    return marked


def annotate():
    """A module pass marking the blocks of :func:`broadcast_producers` in every PrimFunc with no MetaSchedule
    rule; other functions stay as they are."""
    import tvm
    from tvm import s_tir

    def transform(mod, _ctx):
        updates = {}
        for gv, func in mod.functions.items():
            names = broadcast_producers(func) if isinstance(func, tvm.tirx.PrimFunc) else []
            if names:
                sch = s_tir.Schedule(tvm.IRModule({"main": func}))
                for name in names:
                    sch.annotate(sch.get_sblock(name), "schedule_rule", "None")
                updates[gv] = sch.mod["main"]
        for gv, func in updates.items():
            mod[gv] = func
        return mod

    return tvm.transform.module_pass(transform, opt_level=0, name="BroadcastProducersOnce")
