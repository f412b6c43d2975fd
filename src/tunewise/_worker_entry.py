"""The program of a :mod:`tunewise.workers` process: TVM's popen worker loop, in an interpreter that ignores
SIGINT from its start (:func:`tunewise.interrupts.ignore_in_worker`) and where ``import torch`` fails (TVM's
FFI then skips PyTorch)."""

import sys

if __name__ == "__main__":
    from tunewise import interrupts

    interrupts.ignore_in_worker()  # first: a Ctrl-C while TVM is imported would kill the worker
    sys.modules.setdefault("torch", None)
    from tvm.exec.popen_worker import main

    try:
        main()
    except OSError:  # the parent went away
        pass
