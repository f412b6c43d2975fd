"""Importing TVM the fast way (only the tensor intrinsics the target kind uses), its CUDA compiler and its threads.

``import tvm.s_tir.tensor_intrin`` registers the tensor intrinsics of every backend, slowly, and both
``TuneContext`` and the stock builder import it. So before anything imports the package, :func:`prepare`
registers an empty ``tvm.s_tir.tensor_intrin`` package object that still finds its submodules, and imports
only those the target kind uses: the x86 ones on a CPU, none up front for CUDA (only the ``cuda-tensorcore``
rules use them, and the default GPU schedules import them when they tensorise), the real package otherwise.

:func:`use_cuda_compiler` lets TVM's NVRTC compile CUDA where there is no toolkit but NVIDIA's Python packages
hold the headers (a machine without a GPU compiles for one that way), and with ``nvcc`` where NVRTC's bindings
are missing. TVM's CPU runtime runs parallel loops on ``TVM_NUM_THREADS`` threads, else on half the logical
CPUs; :func:`use_target_threads` gives kernels the target's ``num-cores`` threads, in this process and in the
measuring workers it starts afterwards.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import shutil
import sys
import types
import warnings

from tunewise.target import num_cores

_INTRIN_PACKAGE = "tvm.s_tir.tensor_intrin"
_HOST_INTRINSICS = {"x86_64": ("x86",), "AMD64": ("x86",), "aarch64": ("arm_cpu",), "arm64": ("arm_cpu",)}
_INTRINSICS_BY_KIND = {"llvm": _HOST_INTRINSICS.get(platform.machine(), ("x86", "arm_cpu")), "c": (), "cuda": ()}


def versions() -> dict[str, str]:
    """The tunewise and TVM versions of this process (``"unknown"`` for a tunewise not installed as a package),
    recorded with every artifact and every dataset and pretrained model made from runs."""
    from importlib import metadata

    import tvm

    try:
        version = metadata.version("tunewise")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {"tunewise": version, "tvm": tvm.__version__}


def import_tvm() -> None:
    """Import TVM, without PyTorch unless it is imported already.

    TVM's FFI imports PyTorch whenever it is installed (3 CPU-s), for tensor conversions tunewise does not use.
    Imported here first, it goes on without it; PyTorch can still be imported afterwards, where a model comes
    from PyTorch or PyTorch is timed."""
    if "tvm" in sys.modules or "torch" in sys.modules:
        return
    sys.modules["torch"] = None  # `import torch` raises ImportError
    try:
        import tvm  # noqa: F401
    finally:
        del sys.modules["torch"]


def prepare(target_kind: str = "llvm") -> None:
    """Make ``tvm.s_tir.tensor_intrin`` cheap to import for ``target_kind``; idempotent."""
    import tvm.s_tir  # noqa: F401  (5 s: the library itself)

    if target_kind not in _INTRINSICS_BY_KIND:
        importlib.import_module(_INTRIN_PACKAGE)
        return
    if _INTRIN_PACKAGE not in sys.modules:
        package = types.ModuleType(_INTRIN_PACKAGE)
        package.__path__ = [os.path.join(os.path.dirname(sys.modules["tvm.s_tir"].__file__), "tensor_intrin")]
        package.__package__ = _INTRIN_PACKAGE
        sys.modules[_INTRIN_PACKAGE] = package
    for name in _INTRINSICS_BY_KIND[target_kind]:
        importlib.import_module(f"{_INTRIN_PACKAGE}.{name}")
    if target_kind == "cuda":
        use_cuda_compiler()


_TOOLKIT_NVCC = "/usr/local/cuda/bin/nvcc"


def use_cuda_compiler() -> str | None:
    """Set up how TVM compiles CUDA source, in this process and those it starts afterwards; returns the mode,
    ``"nvrtc"`` or ``"nvcc"``, or ``None`` when neither can run here. Nothing changes where
    ``TVM_CUDA_COMPILE_MODE`` is set, or where NVRTC's bindings are importable and the toolkit TVM finds
    (``CUDA_PATH``, else the folder above ``nvcc``'s) has its headers. Otherwise the headers of the
    ``nvidia-cuda-runtime`` and ``nvidia-cuda-cccl`` packages stand in for the toolkit's, and without the
    bindings a toolkit's ``nvcc`` compiles."""
    if "TVM_CUDA_COMPILE_MODE" in os.environ:
        return os.environ["TVM_CUDA_COMPILE_MODE"]
    nvcc = shutil.which("nvcc") or (_TOOLKIT_NVCC if os.path.exists(_TOOLKIT_NVCC) else None)
    toolkit = os.environ.get("CUDA_PATH") or (os.path.dirname(os.path.dirname(nvcc)) if nvcc else None)
    if importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None:
        if toolkit is not None and os.path.isfile(os.path.join(toolkit, "include", "cuda_runtime.h")):
            return "nvrtc"
        root = _packaged_cuda()
        if root is not None:
            os.environ["CUDA_PATH"] = root
            cccl = f"-I{os.path.join(root, 'include', 'cccl')}"
            extra = os.environ.get("TVM_CUDA_NVRTC_EXTRA_OPTS", "")
            if cccl not in extra.split():
                os.environ["TVM_CUDA_NVRTC_EXTRA_OPTS"] = f"{extra} {cccl}".strip()
            return "nvrtc"
    if nvcc is not None:
        os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"
        os.environ["PATH"] = os.pathsep.join([os.path.dirname(nvcc), os.environ.get("PATH", "")])
        return "nvcc"
    return None


def _packaged_cuda() -> str | None:
    """The folder of the CUDA headers NVIDIA's Python packages install (``nvidia/cu13``), if they hold
    ``cuda_runtime.h`` and CCCL's ``cuda/std``."""
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec is not None else []:
        for name in sorted(os.listdir(base), reverse=True):
            root = os.path.join(base, name)
            include = os.path.join(root, "include")
            if (name.startswith("cu") and os.path.isfile(os.path.join(include, "cuda_runtime.h"))
                    and os.path.isdir(os.path.join(include, "cccl", "cuda", "std"))):
                return root
    return None


def use_threads(count: int) -> None:
    """Run TVM kernels on ``count`` threads: in this process, and in every process started after the call
    (they inherit ``TVM_NUM_THREADS``). TVM fixes a process's thread count when its first kernel runs, so a
    process that ran kernels on another count keeps it; a warning says so."""
    if count < 1:
        raise ValueError(f"thread count must be >= 1, got {count!r}")
    os.environ["TVM_NUM_THREADS"] = str(count)
    import tvm

    if tvm.runtime.num_threads() != count:
        warnings.warn(f"TVM kernels in this process keep {tvm.runtime.num_threads()} threads: they ran before "
                      f"{count} were asked for", RuntimeWarning, stacklevel=2)


def use_target_threads(target) -> None:
    """For a CPU (``llvm``) target, :func:`use_threads` with its ``num-cores``; other targets' kernels do not
    run on TVM's CPU thread pool."""
    if target.kind.name == "llvm":
        use_threads(num_cores(target))
