"""The design space MetaSchedule searches for a task, per device: one owner for every search, transfer and
similarity that generates one.

On a CPU, MetaSchedule's rules and postprocessors for the target (``llvm``), with one postprocessor of ours
before them (:func:`aligned_vectorize`) and our rules for the blocks that name them (Winograd's transforms,
transposes in tiles, depthwise convolutions); a bfloat16 product on AMX (:func:`amx_depth`) has a space of its
own, tiled around the AMX intrinsic (:func:`amx_generator`). On an NVIDIA GPU, its ``cuda`` rules, or its
``cuda-tensorcore`` rules where the task reads 16-bit floats: tensor cores compute only on 16-bit inputs here,
and the tensor-core rules need the CUDA tensor intrinsics registered, a slow import that a float32 model
has no use for.
"""

from __future__ import annotations

import functools
import importlib
import math

from tunewise.target import is_gpu

_HALF = ("float16", "bfloat16")


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
    (registering the CUDA tensor intrinsics first when they are used, and our own rules)."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise.lowering import depthwise, transposes, winograd

    winograd.register_rules()
    transposes.register_rules()
    depthwise.register_rules()
    depth = amx_depth(mod, target)
    if depth is not None:
        return amx_generator(depth)
    kind = rules(mod, target)
    if kind == "cuda-tensorcore":
        importlib.import_module("tvm.s_tir.tensor_intrin.cuda")
    if is_gpu(target):
        return ms.space_generator.PostOrderApply(sch_rules=kind, postprocs=kind, mutator_probs=kind)
    postprocs = [aligned_vectorize(), *stock_postprocs(mod, target)]
    return ms.space_generator.PostOrderApply(sch_rules=kind, postprocs=postprocs, mutator_probs=kind)


def amx_depth(mod, target) -> int | None:
    """The depth of the AMX intrinsic a task's search tiles with: for a task that reads an operand in AMX panels
    (:func:`tunewise.lowering.amx.panels`: of its bfloat16 arguments ending in 32 x 2, the one of most
    dimensions; the other operand, in pairs, has one fewer) on an llvm target, the largest multiple of
    :data:`~tunewise.lowering.amx.STEP` up to :data:`~tunewise.lowering.amx.MAX_DEPTH` that divides the
    product's depth; ``None`` for every other task."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from tunewise.lowering.amx import BLOCK, MAX_DEPTH, STEP

    if target.kind.name != "llvm":
        return None
    shapes = [[int(d) for d in arg.shape] for arg in ArgInfo.from_prim_func(mod["main"])
              if str(arg.dtype) == "bfloat16"]
    panels = max((shape for shape in shapes if len(shape) >= 4 and shape[-2:] == [BLOCK, 2]), key=len, default=None)
    if panels is None:
        return None
    depth = 2 * panels[-3]
    return max(d for d in range(STEP, min(depth, MAX_DEPTH) + 1, STEP) if depth % d == 0)


def amx_generator(depth: int):
    """The space of a bfloat16 product on AMX: MetaSchedule's multi-level tiling around the intrinsic of
    ``depth`` (:func:`tunewise.lowering.amx.amx_bf16_intrinsic`), its elementwise epilogue fused where it writes
    back, parallel and unrolled loops but none vectorized (a vectorized loop around the intrinsic's calls
    computes wrong results), and the llvm target's mutators."""
    from tvm.s_tir import meta_schedule as ms

    from tunewise.lowering.amx import amx_bf16_intrinsic

    rules = [ms.schedule_rule.MultiLevelTilingWithIntrin(
                 amx_bf16_intrinsic(depth), structure="SSRSRS", max_innermost_factor=64,
                 reuse_write=ms.schedule_rule.ReuseType(req="may", levels=[1, 2], scope="global")),
             ms.schedule_rule.ParallelizeVectorizeUnroll(max_jobs_per_core=16, max_vectorize_extent=0,
                                                         unroll_max_steps=[0, 16, 64], unroll_explicit=True)]
    postprocs = [ms.postproc.DisallowDynamicLoop(), ms.postproc.RewriteParallelVectorizeUnroll(),
                 ms.postproc.RewriteReductionBlock(), ms.postproc.RewriteTensorize(vectorize_init_loop=False)]
    return ms.space_generator.PostOrderApply(sch_rules=rules, postprocs=postprocs, mutator_probs="llvm")


def stock_postprocs(mod, target) -> list:
    """MetaSchedule's own postprocessors for ``mod`` on ``target`` (a CPU): those ``"from-target"`` picks for
    its features (a tensorization where the CPU has VNNI)."""
    from tvm.s_tir import meta_schedule as ms

    context = ms.TuneContext(mod, target=target, space_generator=ms.space_generator.PostOrderApply(
        sch_rules="from-target", postprocs="from-target", mutator_probs="from-target"))
    return list(context.space_generator.postprocs)


VECTORIZE = "meta_schedule.vectorize"


def vectorize_width(annotated: int, extents) -> int:
    """The vectorisation width of a kernel whose root asks for ``annotated`` lanes and whose blocks' innermost
    loops have ``extents``: the largest width up to ``annotated`` that divides each of them.

    MetaSchedule fuses a block's innermost loops and splits the fused loop by the annotated width; a vector
    that then runs across the end of the innermost loop (a row of 112 floats read 64 at a time) addresses
    memory through a division and a remainder, which TVM cannot prove contiguous, so LLVM loads and stores it
    one element at a time. A width that divides the innermost extent keeps every vector within one row.
    """
    common = math.gcd(*extents) if extents else annotated
    return max(d for d in range(1, min(annotated, common) + 1) if common % d == 0)


def aligned_vectorize():
    """A new instance of the postprocessor that lowers the vectorisation width an injective kernel's root asks
    for (a kernel without reductions: elementwise arithmetic, activations, layout changes) to
    :func:`vectorize_width` of its blocks' innermost loops, before MetaSchedule's own postprocessors vectorise;
    other kernels, and one whose width already fits, are left as they are."""
    return _aligned_vectorize_postproc()()


def _innermost_extents(sch, blocks) -> list[int] | None:
    """The constant extents of the innermost loops of ``blocks`` (those with loops), or ``None`` when one of
    them reduces or has an innermost loop of unknown extent."""
    import tvm

    extents = []
    for block in blocks:
        if any(int(v.iter_type) != 0 for v in sch.get(block).iter_vars):
            return None
        loops = sch.get_loops(block)
        if not loops:
            continue
        extent = sch.get(loops[-1]).extent
        if not isinstance(extent, tvm.tirx.IntImm):
            return None
        extents.append(int(extent))
    return extents


@functools.cache
def _aligned_vectorize_postproc():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.postproc import PyPostproc

    @derived_object
    class AlignedVectorize(PyPostproc):
        """:func:`aligned_vectorize`'s postprocessor."""

        def _initialize_with_tune_context(self, context) -> None:
            pass

        def apply(self, sch) -> bool:
            root = sch.get_sblock("root")
            annotated = sch.get(root).annotations.get(VECTORIZE)
            if annotated is None:
                return True
            extents = _innermost_extents(sch, sch.get_child_blocks(root))
            width = int(annotated) if extents is None else vectorize_width(int(annotated), extents)
            if width != int(annotated):
                sch.unannotate(root, VECTORIZE)
                sch.annotate(root, VECTORIZE, width)
            return True

        def clone(self):
            return AlignedVectorize()

    return AlignedVectorize
