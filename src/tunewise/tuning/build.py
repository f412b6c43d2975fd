"""Building one candidate for measuring: the stock MetaSchedule build without its tensor-intrinsic import (which
:mod:`tunewise.tuning.tvm_env` keeps to what the target kind uses), exported as the tar the runners load."""

from __future__ import annotations

import os
import tempfile


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
