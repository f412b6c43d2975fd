"""Importing TVM the fast way, and building one candidate without the 40-70 s tensor-intrinsic import.

``import tvm.s_tir.tensor_intrin`` registers the tensor intrinsics of every backend (CUDA alone takes ~48 s
on a 2-core VM), and both ``TuneContext`` and the stock builder import it. A CPU target needs at most the x86 ones. So
before anything imports the package, :func:`prepare` registers an empty ``tvm.s_tir.tensor_intrin`` package
object that still finds its submodules, and imports only the submodules the target kind uses. For a CUDA or
ROCm target it imports the real package, as the stock path does.

TVM's CPU runtime runs a kernel's parallel loops on ``TVM_NUM_THREADS`` threads, and without it on half the
logical CPUs (it assumes two hyper-threads a core): one thread on a 2-core VM, where PyTorch uses two.
:func:`use_target_threads` gives kernels the target's ``num-cores`` threads, in this process and in the measuring
workers it starts afterwards.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
import tempfile
import types
import warnings

from tunewise.target import num_cores

_INTRIN_PACKAGE = "tvm.s_tir.tensor_intrin"
_HOST_INTRINSICS = {"x86_64": ("x86",), "AMD64": ("x86",), "aarch64": ("arm_cpu",), "arm64": ("arm_cpu",)}
_INTRINSICS_BY_KIND = {"llvm": _HOST_INTRINSICS.get(platform.machine(), ("x86", "arm_cpu")), "c": ()}


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


def build_candidate(mod, target, params=None):
    """Build one scheduled TIR module for ``target``: the stock ``default_build`` minus the intrinsic import.

    Takes the stock builder's ``f_build(mod, target, params)`` signature (``params`` must be ``None``, as there),
    so ``LocalBuilder(f_build=build_candidate)`` is the stock builder with only that fix.
    """
    if params:
        raise ValueError("build_candidate takes no parameters to bind")
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm.driver.build(mod, target=target)


def export_candidate(rt_mod, directory: str | None = None) -> str:
    """Export a built module as a tar of object files and return its path (what the runner loads)."""
    from tvm.support.tar import tar

    path = os.path.join(tempfile.mkdtemp(dir=directory), "candidate." + tar.output_format)
    rt_mod.export_library(path, fcompile=tar)
    return path
