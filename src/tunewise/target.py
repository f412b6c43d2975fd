"""Compilation targets: the host CPU by default, with its real ``mcpu`` (worth 3.5x on a matmul).

A target is given as ``None``/``"host"``/``"llvm"`` (this machine's CPU: kind llvm, its ``mcpu`` and core
count), as a JSON object (``'{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}'``, taken as is), or as
a TVM tag or kind name such as ``"cuda"``.
"""

from __future__ import annotations

import json
import os
import re

from tunewise.errors import TargetError, message_line

_GPU_KINDS = ("cuda", "rocm", "vulkan", "opencl", "metal")
_X86_VECTOR_ISA = re.compile(r"^(avx|amx|sse|fma|f16c|bmi|sha|aes|vaes|gfni|pclmul|vpclmulqdq)")


def host_cpu() -> dict:
    """This machine's CPU as a TVM target dict."""
    import tvm

    return {"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu(), "num-cores": os.cpu_count() or 1}


def num_cores(target) -> int:
    """The threads a target's kernels use: its ``num-cores``, 1 when it does not say."""
    return int(target.attrs["num-cores"]) if "num-cores" in target.attrs else 1


def resolve(spec=None):
    """Turn a user's target spec into a ``tvm.target.Target`` (a ``Target`` is returned as it is);
    :class:`TargetError` when it is malformed."""
    import tvm

    if isinstance(spec, tvm.target.Target):
        return spec
    if spec is None or spec in ("host", "llvm", "cpu"):
        config: str | dict = host_cpu()
    elif isinstance(spec, dict):
        config = spec
    elif spec.lstrip().startswith("{"):
        try:
            config = json.loads(spec)
        except json.JSONDecodeError as err:
            raise TargetError(f"target is not valid JSON: {err.msg} at column {err.colno}") from None
    elif " -" in spec:
        raise TargetError(f"option strings like {spec!r} are not accepted by TVM 0.27: give a JSON object, "
                          'e.g. \'{"kind": "llvm", "mcpu": "znver3"}\'')
    else:
        config = spec
    try:
        return tvm.target.Target(config)
    except Exception as err:  # TVM raises several error types for a bad target
        raise TargetError(f"bad target {spec!r}: {message_line(err, last=True)}") from None


def device_type(target) -> str:
    """The runner's device name for ``target``: ``"cpu"`` or ``"cuda"`` (not the target kind)."""
    return "cuda" if target.kind.name == "cuda" else "cpu"


def check_runnable(target) -> None:
    """Raise :class:`TargetError` unless this machine can run what is compiled for ``target``: a GPU kind
    (cuda, rocm, vulkan, opencl, metal) needs its device 0; an llvm target with an ``mcpu`` and no
    ``mtriple`` must not need x86 vector instruction sets (AVX, AMX, SSE, ...) this CPU lacks."""
    import tvm
    from tvm.target import codegen

    kind = target.kind.name
    if kind in _GPU_KINDS:
        if not tvm.device(kind, 0).exist:
            raise TargetError(f"target {kind} needs a {kind} device, and this machine has none")
    elif kind == "llvm" and "mcpu" in target.attrs and "mtriple" not in target.attrs:
        host = host_cpu()
        missing = sorted(f for f in set(codegen.llvm_get_cpu_features(target))
                         - set(codegen.llvm_get_cpu_features(tvm.target.Target(host))) if _X86_VECTOR_ISA.match(f))
        if missing:
            raise TargetError(f"this CPU ({host['mcpu']}) cannot run code for mcpu {target.attrs['mcpu']}: it lacks "
                              + ", ".join(missing[:8]) + (", ..." if len(missing) > 8 else ""))
