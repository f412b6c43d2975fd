"""Relax module passes that rewrite calls of given operators, one call at a time: the form every graph step of
tunewise's own (:mod:`tunewise.lowering.graph`, :mod:`tunewise.lowering.precision`) and every import repair
(:mod:`tunewise.importing.repairs`) takes."""

from __future__ import annotations

OUT_EWISE_FUSABLE = 4
"""TVM's ``OpPatternKind.kOutEWiseFusable``, the ``op_pattern`` of a function a rewrite emits that computes a
product or a convolution: its elementwise consumers (bias, activation) fuse into it."""


def rewriting_pass(operators: tuple[str, ...], rewrite, name: str):
    """A module pass named ``name`` that replaces each call of one of ``operators`` (Relax operator names) in
    every Relax function by ``rewrite(builder, call)``, the call's arguments already rewritten and ``builder``
    the ``relax.BlockBuilder`` to emit bindings with; a call for which ``rewrite`` returns None stays."""
    import tvm
    from tvm import relax

    @relax.expr_functor.mutator
    class _Rewriter(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if not isinstance(call.op, tvm.ir.Op) or call.op.name not in operators:
                return call
            rewritten = rewrite(self.builder_, call)
            return call if rewritten is None else rewritten

    @tvm.ir.transform.module_pass(opt_level=0, name=name)
    def _pass(mod, _ctx):
        rewriter = _Rewriter(mod)
        for gv, func in mod.functions.items():
            if isinstance(func, relax.Function):
                rewriter.builder_.update_func(gv, rewriter.visit_expr(func))
        return rewriter.builder_.get()

    return _pass
