"""Importing TVM the fast way, and building one candidate without the 40-70 s tensor-intrinsic import.

``import tvm.s_tir.tensor_intrin`` registers the tensor intrinsics of every backend (CUDA alone takes ~48 s
here), and both ``TuneContext`` and the stock builder import it. A CPU target needs at most the x86 ones. So
before anything imports the package, :func:`prepare` registers an empty ``tvm.s_tir.tensor_intrin`` package
object that still finds its submodules, and imports only the submodules the target kind uses. For a CUDA or
ROCm target it imports the real package, as the stock path does.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
import tempfile
import types

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
