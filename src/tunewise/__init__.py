"""tunewise: fast, cheap deep-learning model tuning on Apache TVM MetaSchedule and Relax.

``result = tunewise.tune("tiny-mlp", budget=tunewise.Budget(max_trials=32))`` tunes a model and writes its
artifact; ``tunewise.load(result.artifact)`` loads it.

TVM's, PyTorch's and ONNX's own output goes to a log file rather than the terminal
(:mod:`tunewise.job.logs`); ``tunewise.set_verbose()`` lets it through.

The names below are imported on first use, so ``import tunewise.runtime`` (or the schedulers) does not pay
for TVM's import.
"""

import importlib

__all__ = ["Budget", "RunSettings", "load", "resume", "set_verbose", "tune", "tune_many"]
__version__ = "0.1.0"

_LAZY = {"Budget": "tunewise.budget", "RunSettings": "tunewise.settings", "load": "tunewise.delivery.compile",
         "resume": "tunewise.job.workflow", "set_verbose": "tunewise.job.logs", "tune": "tunewise.job.workflow",
         "tune_many": "tunewise.cluster"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tunewise' has no attribute {name!r}")
