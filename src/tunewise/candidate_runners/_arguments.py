"""A candidate's arguments, allocated where it runs (in the runner's worker, or on the remote device)."""

from __future__ import annotations


def alloc_arguments(device, args_info, alloc_repeat: int) -> list:
    """The runner's argument allocation (runs in its worker): floating-point tensors random as in MetaSchedule,
    integer tensors zero. MetaSchedule fills integers at random too, and a gather (``take``, embeddings)
    then reads far out of bounds and kills the worker, so such a task never gets a latency; index 0 is in
    bounds for every axis."""
    import numpy as np
    import tvm
    from tvm.s_tir.meta_schedule.runner.utils import alloc_argument_common

    random_fill = tvm.get_global_func("tvm.contrib.random.random_fill_for_measure")

    def fill(tensor) -> None:
        if np.dtype(str(tensor.dtype)).kind in "iub":
            tensor.copyfrom(np.zeros(tuple(tensor.shape), dtype=str(tensor.dtype)))
        else:
            random_fill(tensor)

    return alloc_argument_common(fill, device, args_info, alloc_repeat)
