"""The design space MetaSchedule searches for a task, per device: one owner for every search, transfer and
similarity that generates one.

On a CPU, MetaSchedule's rules for the target (``llvm``), with one rule of ours before its inlining
(:func:`inline_padding`): the padding of a thin convolution (a depthwise one, or a stem reading a few input
channels) is inlined into it in every schedule. MetaSchedule's CPU inlining refuses a block with an
``if_then_else``, and its random compute location then draws where the padding is computed among the root,
each of the tiled convolution's loops and inlining: most samples compute a padded copy of the input. With so
little arithmetic per input element, that copy is a large part of the kernel: on MobileNetV2's 112x112x32 depthwise
convolution, the same tiling ran about 1.6x as fast with the padding inlined as with it computed at its rows
(AMD EPYC ``znver2``, side by side on a loaded host; ``bench/stem_depthwise.md``).

On an NVIDIA GPU, its ``cuda`` rules, or its ``cuda-tensorcore`` rules where the task reads 16-bit floats:
tensor cores compute only on 16-bit inputs here, and the tensor-core rules need the CUDA tensor intrinsics
registered, an import of 40-50 s that a float32 model has no use for.
"""

from __future__ import annotations

import functools
import importlib
import math

from tunewise.target import is_gpu

_HALF = ("float16", "bfloat16")
# the largest reduction (kernel positions times input channels of a group) of a convolution whose padding is
# inlined: depthwise 3x3 (9) to 7x7 (49), a 3x3 stem on three channels (27); a 3x3 convolution on 16 channels
# (144) keeps its padded copy, read by many more multiply-adds
THIN_REDUCTION = 64


def rules(mod, target) -> str:
    """The name of MetaSchedule's rule set that searches ``mod`` (a task's TIR module) on ``target``:
    ``"from-target"`` on a CPU, ``"cuda"`` or ``"cuda-tensorcore"`` on an NVIDIA GPU."""
    if not is_gpu(target) or target.kind.name != "cuda":
        return "from-target"
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    reads_half = any(str(arg.dtype) in _HALF for arg in ArgInfo.from_prim_func(mod["main"]))
    return "cuda-tensorcore" if reads_half else "cuda"


def generator(mod, target):
    """The space generator of ``mod`` on ``target``: MetaSchedule's post-order application of :func:`rules`
    (registering the CUDA tensor intrinsics first when they are used, and our own rules), on a CPU with
    :func:`inline_padding` before MetaSchedule's inlining."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise import winograd

    winograd.register_rules()
    kind = rules(mod, target)
    if kind == "cuda-tensorcore":
        importlib.import_module("tvm.s_tir.tensor_intrin.cuda")
    if is_gpu(target):
        return ms.space_generator.PostOrderApply(sch_rules=kind, postprocs=kind, mutator_probs=kind)
    stock = stock_rules(mod, target)
    first_inline = next((k for k, r in enumerate(stock) if type(r).__name__ == "AutoInline"), 0)
    return ms.space_generator.PostOrderApply(
        sch_rules=[*stock[:first_inline], inline_padding(), *stock[first_inline:]], postprocs=kind,
        mutator_probs=kind)


def stock_rules(mod, target) -> list:
    """MetaSchedule's own schedule rules for ``mod`` on ``target`` (a CPU): those its ``"from-target"`` picks
    for the target's features (a VNNI tiling where the CPU has it)."""
    from tvm.s_tir import meta_schedule as ms

    context = ms.TuneContext(mod, target=target, space_generator=ms.space_generator.PostOrderApply(
        sch_rules="from-target", postprocs="from-target", mutator_probs="from-target"))
    return list(context.space_generator.sch_rules)


def thin_convolution(block) -> bool:
    """Whether ``block`` (a TIR ``SBlock``) is a thin convolution: a reduction over at most
    :data:`THIN_REDUCTION` elements per output, of at least two axes (a kernel window), each output read from
    a window of its input."""
    reductions = [v for v in block.iter_vars if int(v.iter_type) == 2]  # IterVar.CommReduce
    if len(reductions) < 2 or len(block.reads) < 2:
        return False
    extents = [v.dom.extent for v in reductions]
    return all(hasattr(e, "value") for e in extents) and math.prod(int(e) for e in extents) <= THIN_REDUCTION


def is_padding(block) -> bool:
    """Whether ``block`` (a TIR ``SBlock``) is a padding: spatial, one buffer read and one written, the value it
    stores an ``if_then_else`` (the input inside, a constant outside)."""
    import tvm

    if any(int(v.iter_type) != 0 for v in block.iter_vars) or len(block.reads) != 1 or len(block.writes) != 1:
        return False
    store = block.body
    op = getattr(getattr(store, "value", None), "op", None) if isinstance(store, tvm.tirx.BufferStore) else None
    return getattr(op, "name", "").endswith(".if_then_else")


def inline_padding():
    """A new instance of the schedule rule that inlines the padding of a thin convolution into it (a padding,
    :func:`is_padding`, whose only consumer is a thin convolution, :func:`thin_convolution`); it leaves every
    other block as it is."""
    return _inline_padding_rule()()


@functools.cache
def _inline_padding_rule():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.schedule_rule import PyScheduleRule

    @derived_object
    class InlinePaddingRule(PyScheduleRule):
        """:func:`inline_padding`'s rule."""

        def _initialize_with_tune_context(self, context) -> None:
            pass

        def apply(self, sch, block):
            if not is_padding(sch.get(block)):
                return [sch]
            consumers = sch.get_consumers(block)
            if len(consumers) != 1 or not thin_convolution(sch.get(consumers[0])):
                return [sch]
            sch.compute_inline(block)
            return [sch]

        def clone(self):
            return InlinePaddingRule()

    return InlinePaddingRule

