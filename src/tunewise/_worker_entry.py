"""The program of a :mod:`tunewise.workers` process: TVM's popen worker loop, in an interpreter where
``import torch`` fails (TVM's FFI then skips PyTorch)."""

import sys

if __name__ == "__main__":
    sys.modules.setdefault("torch", None)
    from tvm.exec.popen_worker import main

    try:
        main()
    except (OSError, KeyboardInterrupt):  # the parent went away
        pass
