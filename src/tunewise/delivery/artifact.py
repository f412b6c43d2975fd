"""The files of an artifact folder, checked before anything is loaded from them.

``metadata.json`` must be a JSON object with the compilation ``target`` (a TVM target), ``model_sha256`` (the
SHA-256 of ``model.so``, written by :meth:`tunewise.delivery.compile.CompiledModel.save`) and, when present, ``inputs``
as a list of ``{"shape": [...], "dtype": "..."}``. ``model.so`` must hash to ``model_sha256``: loading a
truncated or overwritten shared library can crash the process (SIGBUS) instead of raising, so it is never
loaded unchecked. An artifact without a checksum is refused.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from tunewise.errors import InputError

METADATA = "metadata.json"
LIBRARY = "model.so"
CHECKSUM = "model_sha256"


def sha256(path: str) -> str:
    """The SHA-256 of the file at ``path``, in hex."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _check_inputs(inputs, metadata_path: str) -> None:
    def bad(detail: str):
        return InputError(f"{metadata_path} is corrupt: {detail}; rebuild the artifact")

    if not isinstance(inputs, list):
        raise bad("'inputs' is not a list")
    for spec in inputs:
        shape = spec.get("shape") if isinstance(spec, dict) else None
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise bad(f"input {spec!r} has no shape of whole numbers")
        try:
            np.dtype(spec["dtype"] if isinstance(spec.get("dtype"), str) else "")
        except TypeError:
            raise bad(f"input {spec!r} has no valid dtype") from None


def read(folder: str) -> dict:
    """The checked metadata of the artifact ``folder``; :class:`InputError` says in one line what is wrong."""
    library, metadata_path = os.path.join(folder, LIBRARY), os.path.join(folder, METADATA)
    if not (os.path.isfile(library) and os.path.isfile(metadata_path)):
        raise InputError(f"{folder} is not a tunewise artifact (expected {LIBRARY} and {METADATA} in it)")
    try:
        with open(metadata_path, "rb") as f:
            metadata = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(f"{metadata_path} is corrupt: not JSON text; rebuild the artifact") from None
    if not isinstance(metadata, dict):
        raise InputError(f"{metadata_path} is corrupt: a JSON {type(metadata).__name__}, not an object; "
                         "rebuild the artifact")
    if "target" not in metadata:
        raise InputError(f"{metadata_path} is corrupt: it names no target; rebuild the artifact")
    if CHECKSUM not in metadata:
        run = metadata.get("run")
        how = f"tunewise tune --resume {run} -o {folder}" if isinstance(run, int) else "tunewise tune"
        raise InputError(f"{folder} is not a tunewise artifact of this version ({METADATA} has no checksum of "
                         f"{LIBRARY}): rebuild it with {how}")
    if "inputs" in metadata:
        _check_inputs(metadata["inputs"], metadata_path)
    if sha256(library) != metadata[CHECKSUM]:
        raise InputError(f"{library} is damaged (truncated or overwritten: its SHA-256 differs from the one in "
                         f"{METADATA}); rebuild the artifact")
    return metadata
