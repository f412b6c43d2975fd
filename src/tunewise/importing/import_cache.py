"""Imported models kept on disk, so that importing a model again (a resume, another run, another process) skips
the framework's export and conversion.

An entry is what :func:`tunewise.importing.frontend.load` returns for a zoo name or a model file: the Relax module
(TVM's JSON, weights included), the example inputs, the reference outputs and the further samples. Its key covers
everything the import depends on: the zoo name or the file's contents (not its path or time), the input shapes
and seed asked for, the versions of TVM, PyTorch, ONNX and onnxruntime, and the source of tunewise's import code.
Only successful imports are kept; a damaged entry is removed and the model imported again.

Entries live in ``$TUNEWISE_CACHE_DIR/imports`` (by default ``$XDG_CACHE_HOME/tunewise``, else
``~/.cache/tunewise``); ``TUNEWISE_CACHE_DIR=`` (empty) turns the cache off. The least recently used entries are
removed once they take more than :data:`MAX_BYTES` together.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from importlib import metadata

import numpy as np

CACHE_DIR_VARIABLE = "TUNEWISE_CACHE_DIR"
MAX_BYTES = 2 << 30
_FORMAT = 2  # of an entry's files
_DEPENDENCIES = ("apache-tvm", "torch", "onnx", "onnxruntime")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # src/tunewise
# the tunewise code of an import
_IMPORT_CODE = ("importing/frontend.py", "importing/repairs.py", "zoo/__init__.py", "zoo/architectures.py")
_ABANDONED_SECONDS = 3600  # a folder being written this long ago belongs to a process that died


def folder() -> str | None:
    """Where entries are kept; ``None`` when the cache is off."""
    chosen = os.environ.get(CACHE_DIR_VARIABLE)
    if chosen is None:
        chosen = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tunewise")
    return os.path.join(chosen, "imports") if chosen else None


@functools.cache
def _environment() -> str:
    """The versions of the importing frameworks and the source of tunewise's import code."""
    parts = [f"format {_FORMAT}"]
    for package in _DEPENDENCIES:
        try:
            parts.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{package} absent")
    for name in _IMPORT_CODE:
        with open(os.path.join(_PACKAGE, name), "rb") as f:
            parts.append(hashlib.sha256(f.read()).hexdigest())
    return "\n".join(parts)


def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def key(source: str, *, zoo_model: bool, input_shapes: dict | None, seed: int) -> str:
    """The key of importing ``source`` (a zoo name when ``zoo_model``, else a model file) with these input
    shapes and seed."""
    what = f"zoo {source}" if zoo_model else f"file {_file_digest(source)} {os.path.splitext(source)[1]}"
    shapes = sorted((name, list(shape)) for name, shape in (input_shapes or {}).items())
    text = json.dumps([_environment(), what, shapes, seed])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def get(entry_key: str) -> tuple | None:
    """``(name, module, inputs, reference outputs, samples)`` of the model kept under ``entry_key``, or
    ``None``."""
    root = folder()
    if root is None:
        return None
    entry = os.path.join(root, entry_key)
    if not os.path.isdir(entry):
        return None
    import tvm

    try:
        with open(os.path.join(entry, "model.json")) as f:
            described = json.load(f)
        with open(os.path.join(entry, "module.json")) as f:
            mod = tvm.ir.load_json(f.read())
        with np.load(os.path.join(entry, "arrays.npz")) as arrays:
            inputs = tuple(arrays[f"input{i}"] for i in range(described["inputs"]))
            outputs = tuple(arrays[f"output{i}"] for i in range(described["outputs"]))
            samples = tuple((tuple(arrays[f"sample{j}_input{i}"] for i in range(described["inputs"])),
                             tuple(arrays[f"sample{j}_output{i}"] for i in range(described["outputs"])))
                            for j in range(described["samples"]))
    except Exception:  # a damaged entry (cut short by a full disk, edited by hand) is imported again
        shutil.rmtree(entry, ignore_errors=True)
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)  # recently used
    return described["name"], mod, inputs, outputs, samples


def put(entry_key: str, imported) -> None:
    """Keep ``imported`` (a :class:`~tunewise.importing.frontend.ImportedModel`) under ``entry_key``; a cache that
    cannot
    be written is skipped."""
    root = folder()
    if root is None:
        return
    import tvm

    try:
        os.makedirs(root, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".writing-", dir=root)
    except OSError:
        return
    try:
        with open(os.path.join(staging, "module.json"), "w") as f:
            f.write(tvm.ir.save_json(imported.mod))
        arrays = {f"input{i}": x for i, x in enumerate(imported.inputs)}
        arrays.update({f"output{i}": y for i, y in enumerate(imported.reference_outputs)})
        for j, (inputs, outputs) in enumerate(imported.samples):
            arrays.update({f"sample{j}_input{i}": x for i, x in enumerate(inputs)})
            arrays.update({f"sample{j}_output{i}": y for i, y in enumerate(outputs)})
        np.savez(os.path.join(staging, "arrays.npz"), **arrays)
        with open(os.path.join(staging, "model.json"), "w") as f:  # written last: an entry with it is whole
            json.dump({"name": imported.name, "inputs": len(imported.inputs),
                       "outputs": len(imported.reference_outputs), "samples": len(imported.samples)}, f)
        os.rename(staging, os.path.join(root, entry_key))  # atomic; another process may have kept it first
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        return
    _evict(root)


def _size(path: str) -> int:
    return sum(entry.stat().st_size for entry in os.scandir(path) if entry.is_file())


def _evict(root: str) -> None:
    """Remove the least recently used entries while all of them take more than :data:`MAX_BYTES`, and the
    folders of writes abandoned long ago."""
    entries, now = [], time.time()
    for entry in os.scandir(root):
        with contextlib.suppress(OSError):
            if not entry.is_dir():
                continue
            if not entry.name.startswith("."):
                entries.append((entry.stat().st_mtime, _size(entry.path), entry.path))
            elif entry.stat().st_mtime < now - _ABANDONED_SECONDS:
                shutil.rmtree(entry.path, ignore_errors=True)
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= MAX_BYTES:
            break
        shutil.rmtree(path, ignore_errors=True)
        total -= size
