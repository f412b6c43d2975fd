"""A candidate's arguments, allocated where it runs (in the runner's worker, or on the remote device)."""

from __future__ import annotations


def alloc_arguments(device, args_info, alloc_repeat: int) -> list:
    """The runner's argument allocation (runs in its worker): floating-point tensors random as in MetaSchedule,
    masks (booleans and 8-bit integers) true, wider integer tensors zero.

    MetaSchedule fills integers at random, and a gather (``take``, embeddings) then reads out of bounds and kills
    the worker; index 0 is in bounds for every axis. A mask false everywhere would time a kernel that skips the
    masked work doing almost nothing, so masks are true, as a model without padding has them.
    """
    import numpy as np
    import tvm
    from tvm.s_tir.meta_schedule.runner.utils import alloc_argument_common

    random_fill = tvm.get_global_func("tvm.contrib.random.random_fill_for_measure")

    def fill(tensor) -> None:
        dtype = np.dtype(str(tensor.dtype))
        if dtype.kind == "b" or (dtype.kind in "iu" and dtype.itemsize == 1):
            tensor.copyfrom(np.ones(tuple(tensor.shape), dtype=dtype))
        elif dtype.kind in "iu":
            tensor.copyfrom(np.zeros(tuple(tensor.shape), dtype=dtype))
        else:
            random_fill(tensor)

    return alloc_argument_common(fill, device, args_info, alloc_repeat)
