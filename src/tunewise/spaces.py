"""The design space MetaSchedule searches for a task, per device: one owner for every search, transfer and
similarity that generates one.

On a CPU, MetaSchedule's rules for the target (``llvm``). On an NVIDIA GPU, its ``cuda`` rules, or its
``cuda-tensorcore`` rules where the task reads 16-bit floats: tensor cores compute only on 16-bit inputs here,
and the tensor-core rules need the CUDA tensor intrinsics registered, an import of 40-50 s that a float32 model
has no use for.
"""

from __future__ import annotations

import importlib

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

    from tunewise import winograd

    winograd.register_rules()
    kind = rules(mod, target)
    if kind == "cuda-tensorcore":
        importlib.import_module("tvm.s_tir.tensor_intrin.cuda")
    return ms.space_generator.PostOrderApply(sch_rules=kind, postprocs=kind, mutator_probs=kind)
