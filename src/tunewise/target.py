"""Compilation targets: the host CPU by default, with its real ``mcpu`` (worth 3.5x on a matmul here).

A target is given as ``None``/``"host"``/``"llvm"`` (this machine's CPU: kind llvm, its ``mcpu`` and core
count), as a JSON object (``'{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}'``, taken as is), or as
a TVM tag or kind name such as ``"cuda"``.
"""

from __future__ import annotations

import json
import os

from tunewise.errors import TargetError, message_line


def host_cpu() -> dict:
    """This machine's CPU as a TVM target dict."""
    import tvm

    return {"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu(), "num-cores": os.cpu_count() or 1}


def num_cores(target) -> int:
    """The threads a target's kernels use: its ``num-cores``, 1 when it does not say."""
    return int(target.attrs["num-cores"]) if "num-cores" in target.attrs else 1


def resolve(spec: str | dict | None = None):
    """Turn a user's target spec into a ``tvm.target.Target``; :class:`TargetError` when it is malformed."""
    import tvm

    if spec is None or spec in ("host", "llvm", "cpu"):
        config: str | dict = host_cpu()
    elif isinstance(spec, dict):
        config = spec
    elif spec.lstrip().startswith("{"):
        try:
            config = json.loads(spec)
        except json.JSONDecodeError as err:
            raise TargetError(f"target is not valid JSON: {err.msg} at column {err.colno}") from None
    elif " -" in spec:
        raise TargetError(f"option strings like {spec!r} are not accepted by TVM 0.27: give a JSON object, "
                          'e.g. \'{"kind": "llvm", "mcpu": "znver3"}\'')
    else:
        config = spec
    try:
        return tvm.target.Target(config)
    except Exception as err:  # TVM raises several error types for a bad target
        raise TargetError(f"bad target {spec!r}: {message_line(err, last=True)}") from None


def device_type(target) -> str:
    """The runner's device name for ``target``: ``"cpu"`` or ``"cuda"`` (not the target kind)."""
    return "cuda" if target.kind.name == "cuda" else "cpu"
