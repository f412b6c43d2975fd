"""Concatenations without the copy: the producers of a concatenation write their slices of its result.

After fusion a concatenation is a kernel of its own that copies its inputs into a new tensor (a channel
concatenation of channels-last data copies every element once more). :func:`in_place` removes that kernel where at
least one input is the only use of the only output of a TIR call in the same dataflow block (a fused convolution
with its bias and activation): each such producer is rewritten to take the whole concatenated tensor as its output
and write its slice of it (:func:`write_into`; one that fails to is copied, with a warning), the other inputs are
copied into their slices, the first part allocates the tensor (``call_tir``) and each next part writes into the
tensor the part before it returned (``call_tir_inplace``). A rewritten producer is a TIR workload of its own,
tuned like any other.

MetaSchedule's task extraction sees ``call_tir`` calls only: :func:`extractable` is the module to extract from,
each in-place call written as the ``call_tir`` of the same function.
"""

from __future__ import annotations

import logging

from tunewise.errors import message_line

_log = logging.getLogger(__name__)


def in_place():
    """A module pass (on a lowered module, after ``FuseTIR``) removing the concatenation kernels whose inputs can
    be written in place, as the module docstring says; a module without such a concatenation stays as it is."""
    import tvm
    from tvm import relax

    @tvm.transform.module_pass(opt_level=0, name="ConcatInPlace")
    def rewrite(mod, _ctx):
        builder = relax.BlockBuilder(mod)
        made: dict[tuple, object] = {}  # (function, total, offset, axis) -> the rewritten function's global var

        def part(gv, total: int, offset: int, axis: int):
            key = (gv, total, offset, axis)
            if key not in made:
                try:
                    func = write_into(mod[gv], total, offset, axis)
                except Exception as err:  # TVM raises its C++ failures as several error types
                    _log.warning("%s stays a copy into a concatenation: rewriting it failed (%s)", gv.name_hint,
                                 message_line(err))
                    func = None
                made[key] = None if func is None else builder.add_func(func, f"{gv.name_hint}_slice")
            return made[key]

        def copy(ty, total: int, offset: int, axis: int):
            key = (tuple(int(d) for d in ty.shape), str(ty.dtype), total, offset, axis)
            if key not in made:
                made[key] = builder.add_func(write_into(_identity(ty), total, offset, axis), "copy_slice")
            return made[key]

        changed = False
        for gv, func in list(mod.functions.items()):
            if not isinstance(func, relax.Function) or not isinstance(func.body, relax.SeqExpr):
                continue
            blocks = [_rewrite_block(mod, block, func.body.body, part, copy) for block in func.body.blocks]
            if any(new is not old for new, old in zip(blocks, func.body.blocks, strict=True)):
                changed = True
                builder.update_func(gv, relax.Function(func.params, relax.SeqExpr(blocks, func.body.body),
                                                       func.ret_ty, func.is_pure, func.attrs))
        if not changed:
            return mod
        return tvm.transform.Sequential([relax.transform.Normalize(),
                                         relax.transform.DeadCodeElimination()])(builder.get())

    return rewrite


def concat_axis(func) -> int | None:
    """The axis that ``func`` (a TIR function) concatenates its inputs on, its last parameter the result, where it is
    exactly TOPI's concatenation of static shapes (as ``LegalizeOps`` writes ``concat``); else None."""
    import tvm_ffi
    from tvm import te, tirx, topi

    if not isinstance(func, tirx.PrimFunc) or len(func.params) < 3:
        return None
    types = [p.ty for p in func.params]
    if not all(isinstance(t, tirx.BufferType) for t in types):
        return None
    try:
        shapes = [[int(d) for d in t.shape] for t in types]
    except TypeError:  # a symbolic dimension
        return None
    out = shapes[-1]
    if any(len(s) != len(out) or str(t.dtype) != str(types[-1].dtype) for s, t in zip(shapes, types, strict=True)):
        return None
    axes = {a for s in shapes[:-1] for a in range(len(out)) if s[a] != out[a]}
    if len(axes) != 1:
        return None
    axis = axes.pop()
    inputs = [te.placeholder(t.shape, t.dtype, f"x{k}") for k, t in enumerate(types[:-1])]
    reference = te.create_prim_func([*inputs, topi.concatenate(inputs, axis)])
    same = tvm_ffi.structural_equal(tirx.PrimFunc(reference.params, reference.body),
                                    tirx.PrimFunc(func.params, func.body))
    return axis if same else None


def write_into(func, total: int, offset: int, axis: int):
    """``func`` (a TIR function whose last parameter is its only output) writing its output into a tensor of
    extent ``total`` on ``axis`` instead, at ``offset`` along that axis, and nothing else of it; None where the
    output is used otherwise than by loads, stores and block regions."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    out = func.params[-1]
    shape = list(out.ty.shape)
    shape[axis] = tirx.IntImm(shape[axis].ty.dtype, total)
    whole = tirx.decl_buffer(shape, out.ty.dtype, out.name, layout=None)

    def shifted(indices):
        indices = list(indices)
        indices[axis] = indices[axis] + offset
        return indices

    def store(node):
        return tirx.BufferStore(whole, node.value, shifted(node.indices)) if node.buffer.same_as(out) else node

    def load(node):
        return tirx.BufferLoad(whole, shifted(node.indices)) if node.source.same_as(out) else node

    def region(node):
        if not node.source.same_as(out):
            return node
        ranges = list(node.region)
        ranges[axis] = tvm.ir.Range.from_min_extent(ranges[axis].min + offset, ranges[axis].extent)
        return tirx.BufferRegion(whole, ranges)

    body = tvm_ffi.structural_map(func.body, [(tirx.BufferStore, store), (tvm.ir.TensorLoad, load),
                                              (tvm.ir.TensorRegion, region)])
    left: list = []
    tvm_ffi.structural_walk(body, [(tvm.ir.Var, lambda var: left.append(var) if var.same_as(out) else None)])
    return None if left else tirx.PrimFunc([*func.params[:-1], whole], body, attrs=func.attrs)


def _identity(ty):
    """A TIR function copying a tensor of type ``ty`` (a Relax tensor type of static shape)."""
    from tvm import te

    x = te.placeholder([int(d) for d in ty.shape], str(ty.dtype), "x")
    return te.create_prim_func([x, te.compute(x.shape, lambda *i: x(*i), "copy")])


def _tir_call(mod, value):
    """``(global var, arguments)`` of ``value`` where it calls a TIR function of ``mod`` with one output and no
    symbolic arguments (``call_tir``); else None."""
    import tvm
    from tvm import relax, tirx

    if not (isinstance(value, relax.Call) and value.op.same_as(tvm.ir.Op.get("relax.call_tir"))
            and len(value.args) == 2 and isinstance(value.args[1], relax.Tuple)):
        return None
    gv, args = value.args
    if gv not in mod.functions or not isinstance(mod[gv], tirx.PrimFunc):
        return None
    return (gv, list(args.fields)) if len(mod[gv].params) == len(args.fields) + 1 else None


def _rewrite_block(mod, block, result, part, copy):
    """``block`` with each concatenation that can be written in place so written (``part`` and ``copy`` give the
    functions of a producer's and of a copied input's slices); ``block`` itself where there is none. ``result`` is
    what the enclosing function returns (a use of the block's variables)."""
    from tvm import relax

    if not isinstance(block, relax.DataflowBlock):
        return block
    uses: dict = {}
    for binding in block.bindings:
        for var in relax.analysis.free_vars(binding.value):
            uses[var] = uses.get(var, 0) + 1
    for var in relax.analysis.free_vars(result):
        uses[var] = uses.get(var, 0) + 1
    index = {binding.var: k for k, binding in enumerate(block.bindings)}
    replaced: dict[int, list] = {}  # binding index -> the bindings that take its place
    for k, binding in enumerate(block.bindings):
        call = _tir_call(mod, binding.value)
        axis = None if call is None else concat_axis(mod[call[0]])
        if axis is None:
            continue
        ty, inputs = binding.var.ty, call[1]
        total, offsets = int(ty.shape[axis]), [0]
        for var in inputs:
            offsets.append(offsets[-1] + int(var.ty.shape[axis]))
        producers, copies = [], []
        for j, var in enumerate(inputs):
            producer = None
            if (isinstance(var, relax.DataflowVar) and var in index and uses.get(var) == 1
                    and index[var] not in replaced and sum(1 for w in inputs if w.same_as(var)) == 1):
                producer = _tir_call(mod, block.bindings[index[var]].value)
            rewritten = None if producer is None else part(producer[0], total, offsets[j], axis)
            if rewritten is None:
                copies.append((k, copy(var.ty, total, offsets[j], axis), [var]))
            else:
                producers.append((index[var], rewritten, producer[1]))
        if not producers:
            continue
        parts = sorted(producers, key=lambda p: p[0]) + copies
        previous = None
        for n, (at, gv, args) in enumerate(parts):
            last = n == len(parts) - 1
            var = binding.var if last else relax.DataflowVar(f"{binding.var.name}_part{n}", ty)
            value = (relax.call_tir(gv, relax.Tuple(args), ty) if previous is None else
                     relax.call_tir_inplace(gv, relax.Tuple([*args, previous]), [len(args)], ty))
            replaced.setdefault(at, []).append(relax.VarBinding(var, value))
            previous = var
        replaced.setdefault(k, [])
    if not replaced:
        return block
    bindings = []
    for k, binding in enumerate(block.bindings):
        bindings.extend(replaced.get(k, [binding]))
    return relax.DataflowBlock(bindings)
