"""Kernels that split their work between threads by rows, so that each thread reads what it wrote.

A CPU kernel's parallel loop is the fusion of its outermost loops, and TVM's thread pool gives each thread one
contiguous chunk of it: the first loop of extent above one decides which part of the output a thread writes.
When a convolution splits its output by rows and the next one by columns or channels, each thread of the
second reads half of its input from the other core's cache. Measured inside a tuned MobileNetV2 on two cores
(`bench/README.md`, "Threads that read what the other one wrote"), a depthwise convolution split by columns
after an expansion split by rows took 2.4-3.8x its time when called twice in a row, where on one thread it took
1.1-1.2x.

So on a CPU every candidate whose function writes a 4-D output (the channels-last activations of convolutions
and pools) must split it by its first dimension of extent above one, the rows (:func:`splits_by_rows`): the
design-space check :class:`RowPartition` rejects the others, as MetaSchedule's own postprocessors reject
candidates they cannot complete. Consecutive convolutions then give each thread the same band of rows.
"""

from __future__ import annotations

import functools
import re

# the rank of the outputs held to the rule: channels-last activations (a batch, rows, columns, channels)
ACTIVATION_RANK = 4


def _children(stmt):
    for attr in ("body", "then_case", "else_case"):
        child = getattr(stmt, attr, None)
        if child is not None:
            yield child
    yield from getattr(stmt, "seq", None) or ()
    block = getattr(stmt, "block", None)
    if block is not None:
        yield block


def _unit(extent) -> bool:
    return getattr(extent, "value", None) == 1


def _output_nests(stmt, loops: tuple, outputs, found: list) -> None:
    """Each block of ``stmt`` that writes one of ``outputs`` (buffers), with the loops around it."""
    import tvm

    if isinstance(stmt, tvm.tirx.For):
        loops = (*loops, stmt)
    if isinstance(stmt, tvm.s_tir.SBlockRealize) and any(w.source.same_as(b) for w in stmt.block.writes
                                                          for b in outputs):
        found.append((stmt, loops))
    for child in _children(stmt):
        _output_nests(child, loops, outputs, found)


def splits_by_rows(func) -> bool:
    """Whether every block of the TIR function ``func`` that writes a 4-D output of the function splits it by
    its first dimension of extent above one: the outermost loop of extent above one around the block either
    binds only reduction axes (the block is not parallelised) or binds that dimension. Functions without such an
    output pass."""
    outputs = [p for p in func.params if len(getattr(p, "shape", ())) == ACTIVATION_RANK]
    found: list = []
    _output_nests(func.body, (), outputs, found)
    for realize, loops in found:
        spatial = [(iv, value) for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
                   if int(iv.iter_type) == 0]
        leading = next((iv for iv, _ in spatial if not _unit(iv.dom.extent)), None)
        outer = next((loop for loop in loops if not _unit(loop.extent)), None)
        if leading is None or outer is None:
            continue
        name = re.compile(rf"\b{re.escape(outer.loop_var.name)}\b")
        bound = [iv for iv, value in spatial if name.search(str(value))]
        if bound and not any(iv.same_as(leading) for iv in bound):
            return False
    return True


@functools.cache
def _postproc_class():
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    @derived_object
    class RowPartition(ms.postproc.PyPostproc):
        def _initialize_with_tune_context(self, context) -> None:
            pass

        def apply(self, sch) -> bool:
            return splits_by_rows(sch.mod["main"])

        def clone(self):
            return RowPartition()

    return RowPartition


def postproc():
    """A MetaSchedule postprocessor that keeps only candidates whose 4-D outputs split by rows
    (:func:`splits_by_rows`). It reads the loops before MetaSchedule fuses the outer ones into the parallel loop,
    so it goes first in the list."""
    return _postproc_class()()
