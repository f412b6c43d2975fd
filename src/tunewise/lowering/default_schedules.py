"""The schedules of functions that have no tuned record, per device.

On a CPU an unscheduled TIR function compiles and runs as it is (LLVM vectorises its loops where it can), so
it needs none. On a GPU it has no thread binding and cannot run at all: every function without a tuned record,
tuning tasks and the glue between them alike, gets TVM's default GPU schedules, the ``dlight`` rules of TVM's
own Relax CUDA pipeline (matrix multiplication, matrix-vector, reductions, and a fallback that binds any loop
nest to blocks and threads), then ``DefaultGPUSchedule`` for whatever no rule took. A task's default latency
is measured under these schedules, and compilation applies them after the tuned records
(:func:`tunewise.lowering.graph.compile_pipeline`), to the functions the records left unscheduled.
"""

from __future__ import annotations

from tunewise.target import is_gpu


def passes(target) -> list:
    """The passes that schedule ``target``'s unscheduled TIR functions by default (none on a CPU); functions
    already scheduled (``tirx.is_scheduled``, set by tuned records) are left as they are. Run them with the
    target in context."""
    if not is_gpu(target):
        return []
    from tvm.s_tir import dlight as dl
    from tvm.s_tir import transform

    return [dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(), dl.gpu.GeneralReduction(),
                                    dl.gpu.Fallback()),
            transform.DefaultGPUSchedule()]


def apply(mod, target):
    """A copy of ``mod`` (an IRModule of TIR functions, such as a task's) with :func:`passes` applied for
    ``target``: what a function without a tuned record runs as; ``mod`` itself is left as it is (the default
    schedule rules write into the module they are given). ``mod`` for a CPU target."""
    chosen = passes(target)
    if not chosen:
        return mod
    import tvm

    copy = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential(chosen)(copy)
