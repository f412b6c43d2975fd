"""Compilation targets: a device, the host CPU by default, with what MetaSchedule needs to know of it.

A target is given as ``None``/``"host"``/``"llvm"``/``"cpu"`` (this machine's CPU: kind llvm, its real ``mcpu``
and its core count), as ``"cuda"``/``"gpu"`` (NVIDIA GPU 0 of this machine, its attributes read from the
device: :func:`cuda_description`, :func:`cuda_config`), as a JSON object, or as a TVM tag or kind name.

A JSON object is taken as given, completed with what MetaSchedule cannot tune without: an llvm target
without ``num-cores`` gets the cores this process may use (:func:`usable_cores`); a cuda target without its
architecture, threads per block, shared memory per block or warp size gets them from GPU 0, and is refused
(:class:`TargetError`, naming what is missing) on a machine without one.
"""

from __future__ import annotations

import json
import os
import re

from tunewise.errors import TargetError, message_line

_GPU_KINDS = ("cuda", "rocm", "vulkan", "opencl", "metal")
_X86_VECTOR_ISA = re.compile(r"^(avx|amx|sse|fma|f16c|bmi|sha|aes|vaes|gfni|pclmul|vpclmulqdq)")


def usable_cores() -> int:
    """The CPU cores this process may run on: those of its affinity mask (``taskset``, a container's CPU set,
    a cluster node's share of a machine), else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def host_cpu() -> dict:
    """This machine's CPU, as far as this process may use it (:func:`usable_cores`), as a TVM target dict: the
    CPU LLVM names from its model number, and as ``mattr`` the x86 vector instruction sets (AVX, AMX, ...) the CPU
    reports beyond that CPU's. A virtual machine may present a newer CPU under an older model number (AMX
    tiles under Rocket Lake's): without them, code would be built for the older CPU."""
    import tvm
    import tvm_ffi
    from tvm.target import codegen

    config = {"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu(), "num-cores": usable_cores()}
    reported = tvm_ffi.get_global_func("tvm.codegen.llvm.GetHostCPUFeatures")()
    named = set(codegen.llvm_get_cpu_features(tvm.target.Target(config)))
    beyond = sorted(f for f, on in reported.items() if on and f not in named and _X86_VECTOR_ISA.match(f))
    if beyond:
        config["mattr"] = [f"+{f}" for f in beyond]
    return config


def cuda_description(index: int = 0) -> dict | None:
    """What TVM's device API reports of NVIDIA GPU ``index`` (``None`` when there is none): its name,
    compute version, threads and shared memory per block, warp size, multiprocessors, L2 cache and memory.
    :func:`cuda_config` turns it into a target; artifacts and results record it."""
    import tvm

    device = tvm.cuda(index)
    if not device.exist:
        return None
    return {"name": device.device_name, "compute_version": device.compute_version,
            "max_threads_per_block": device.max_threads_per_block,
            "max_shared_memory_per_block": device.max_shared_memory_per_block, "warp_size": device.warp_size,
            "multi_processor_count": device.multi_processor_count, "l2_cache_size_bytes": device.l2_cache_size_bytes,
            "total_global_memory": device.total_global_memory}


def cuda_arch(compute_version: str) -> str:
    """The ``arch`` of a GPU of ``compute_version``: ``"9.0"`` -> ``"sm_90a"``. From compute capability 9 on,
    the architecture-specific variant (``a``), as TVM's own detection names it: code built for it runs on
    that architecture only, which is the one tuned for.

    >>> cuda_arch("8.6"), cuda_arch("9.0")
    ('sm_86', 'sm_90a')
    """
    major, minor = (int(part) for part in compute_version.split(".")[:2])
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def cuda_config(description: dict) -> dict:
    """A complete cuda target (a dict for ``tvm.target.Target``) for the GPU ``description``
    (:func:`cuda_description`), with this machine's CPU as its host."""
    return {"kind": "cuda", "arch": cuda_arch(description["compute_version"]),
            "max_threads_per_block": int(description["max_threads_per_block"]),
            "max_num_threads": int(description["max_threads_per_block"]),
            "max_shared_memory_per_block": int(description["max_shared_memory_per_block"]),
            "thread_warp_size": int(description["warp_size"]),
            "l2_cache_size_bytes": int(description["l2_cache_size_bytes"]), "host": host_cpu()}


CUDA_NEEDS = ("arch", "max_threads_per_block", "max_shared_memory_per_block", "thread_warp_size")


def complete(config: dict, description: dict | None = None) -> dict:
    """``config`` (a target dict) with what MetaSchedule needs filled in where it is missing: an llvm
    target's ``num-cores`` (:func:`usable_cores`), a cuda target's :data:`CUDA_NEEDS` from ``description`` (by
    default GPU 0's, :func:`cuda_description`). :class:`TargetError` when a cuda target lacks some and there
    is no GPU to read them from."""
    kind = config.get("kind")
    if kind == "llvm" and "num-cores" not in config:
        return {**config, "num-cores": usable_cores()}
    if kind != "cuda" or all(key in config for key in CUDA_NEEDS):
        return config
    description = description or cuda_description()
    if description is None:
        missing = [key for key in CUDA_NEEDS if key not in config]
        raise TargetError(f"the cuda target lacks {', '.join(missing)}, and this machine has no NVIDIA GPU to "
                          f"read them from: give them in the JSON target")
    return {**cuda_config(description), **config}


def is_gpu(target) -> bool:
    """Whether ``target`` compiles for a GPU, whose kernels need thread bindings to run."""
    return "gpu" in [str(key) for key in target.keys]


def num_cores(target) -> int:
    """The CPU threads that work for ``target``: a CPU target's ``num-cores`` (its kernels' threads), a GPU
    target's host's (the threads that search and compile for it); 1 when it does not say."""
    cpu = target.host if target.host is not None and is_gpu(target) else target
    return int(cpu.attrs["num-cores"]) if "num-cores" in cpu.attrs else 1


def resolve(spec=None):
    """Turn a user's target spec into a ``tvm.target.Target`` (a ``Target`` is returned as it is);
    :class:`TargetError` when it is malformed."""
    import tvm

    if isinstance(spec, tvm.target.Target):
        return spec
    if spec is None or spec in ("host", "llvm", "cpu"):
        config: str | dict = host_cpu()
    elif spec in ("cuda", "gpu"):
        description = cuda_description()
        if description is None:
            raise TargetError(f"target {spec} needs an NVIDIA GPU, and this machine has none")
        config = cuda_config(description)
    elif isinstance(spec, dict):
        config = complete(spec)
    elif spec.lstrip().startswith("{"):
        try:
            config = json.loads(spec)
        except json.JSONDecodeError as err:
            raise TargetError(f"target is not valid JSON: {err.msg} at column {err.colno}") from None
        if not isinstance(config, dict):
            raise TargetError(f"target {spec!r} is not a JSON object")
        config = complete(config)
    elif " -" in spec:
        raise TargetError(f"option strings like {spec!r} are not accepted by TVM 0.27: give a JSON object, "
                          'e.g. \'{"kind": "llvm", "mcpu": "znver3"}\'')
    else:
        config = spec
    try:
        target = tvm.target.Target(config)
    except Exception as err:  # TVM raises several error types for a bad target
        raise TargetError(f"bad target {spec!r}: {message_line(err, last=True)}") from None
    _check_cpu_known(target)
    return target


ISA_CLASSES = ("amx", "avx512-vnni", "avx512", "avx2")
"""The CPU instruction-set classes knowledge is kept apart by (bundled records, pretrained cost models),
richest first: records tuned for one class are used only on targets of that class."""
AMX_BF16 = ("amx-tile", "amx-bf16")
"""The LLVM features of AMX's bfloat16 products: what ISA class ``amx`` and precision bfloat16 need."""


def isa_class(target) -> str | None:
    """The :data:`ISA_CLASSES` name of an llvm ``target`` (a ``tvm.target.Target``): ``"amx"`` with AMX tiles
    for bfloat16, ``"avx512-vnni"`` with AVX-512 VNNI or BF16, ``"avx512"`` with AVX-512F, ``"avx2"`` with AVX2
    and FMA; ``None`` for any other target (a GPU, a CPU without AVX2)."""
    from tvm.target import codegen

    if target.kind.name != "llvm":
        return None
    features = set(codegen.llvm_get_cpu_features(target))
    if set(AMX_BF16) <= features:
        return "amx"
    if "avx512f" in features:
        return "avx512-vnni" if features & {"avx512vnni", "avx512bf16"} else "avx512"
    if {"avx2", "fma"} <= features:
        return "avx2"
    return None


def _architecture(triple: str) -> str:
    """The architecture a target triple names (``x86_64`` of ``x86_64-linux-gnu``; ``amd64`` as ``x86_64``)."""
    arch = triple.split("-", 1)[0]
    return "x86_64" if arch == "amd64" else arch


def _check_cpu_known(target) -> None:
    """:class:`TargetError` when ``target`` (llvm) names an ``mcpu`` LLVM does not know for its triple: LLVM
    would ignore it and emit code for a generic CPU, several times slower."""
    from tvm.target import codegen

    host = target.host if target.host is not None and is_gpu(target) else target
    if host.kind.name != "llvm" or "mcpu" not in host.attrs:
        return
    known = list(codegen.llvm_get_cpu_archlist(host))
    if known and str(host.attrs["mcpu"]) not in known:
        raise TargetError(f"unknown mcpu {str(host.attrs['mcpu'])!r}: LLVM knows " + ", ".join(known[:6]) + ", ... "
                          f"(this machine's: {host_cpu()['mcpu']!r})")


def check_cores(target) -> None:
    """Raise :class:`TargetError` when ``target`` asks for more CPU threads (:func:`num_cores`) than this
    process may use (:func:`usable_cores`): tunewise measures where it runs, and more threads than cores time
    every kernel oversubscribed, so the tuning would pick schedules for a machine it never measured."""
    wanted, usable = num_cores(target), usable_cores()
    if wanted > usable:
        raise TargetError(f"the target asks for {wanted} cores (num-cores), and this process may use {usable}: "
                          f"tunewise measures where it runs; give num-cores {usable} or fewer")


def device_type(target) -> str:
    """The runner's device name for ``target``: ``"cpu"`` or ``"cuda"`` (not the target kind)."""
    return "cuda" if target.kind.name == "cuda" else "cpu"


def check_runnable(target) -> None:
    """Raise :class:`TargetError` unless this machine can run what is compiled for ``target``: a GPU kind
    (cuda, rocm, vulkan, opencl, metal) needs its device 0; an llvm target with an ``mtriple`` must name this
    machine's architecture, and one with an ``mcpu`` and no ``mtriple`` must not need x86 vector instruction sets
    (AVX, AMX, SSE, ...) this CPU lacks. For an llvm target with AMX tiles, this process is granted them
    (:func:`tunewise.lowering.amx.enable_amx`): its kernels may use them."""
    import tvm
    from tvm.target import codegen

    kind = target.kind.name
    if kind in _GPU_KINDS:
        if not tvm.device(kind, 0).exist:
            raise TargetError(f"target {kind} needs a {kind} device, and this machine has none")
    elif kind == "llvm" and "mtriple" in target.attrs:
        wanted, here = (_architecture(t) for t in (str(target.attrs["mtriple"]), codegen.llvm_get_system_triple()))
        if wanted != here:
            raise TargetError(f"this {here} machine cannot run code for {target.attrs['mtriple']}: tunewise "
                              f"measures and checks the model where it runs")
    elif kind == "llvm" and "mcpu" in target.attrs:
        host = host_cpu()
        missing = sorted(f for f in set(codegen.llvm_get_cpu_features(target))
                         - set(codegen.llvm_get_cpu_features(tvm.target.Target(host))) if _X86_VECTOR_ISA.match(f))
        if missing:
            raise TargetError(f"this CPU ({host['mcpu']}) cannot run code for mcpu {target.attrs['mcpu']}: it lacks "
                              + ", ".join(missing[:8]) + (", ..." if len(missing) > 8 else ""))
    if kind == "llvm" and "amx-tile" in set(codegen.llvm_get_cpu_features(target)):
        from tunewise.lowering.amx import enable_amx

        enable_amx()
