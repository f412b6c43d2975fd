"""Where results will be written, checked before the work that produces them starts.

A tuning run can take hours; an artifact folder or report file that cannot be written should be refused
before it, in one line, not found after it.
"""

from __future__ import annotations

import os
import tempfile

from tunewise.errors import InputError


def _nearest_existing(path: str) -> str:
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def check_folder(path: str, what: str) -> str:
    """Raise :class:`InputError` unless ``path`` is a writable folder or one that can be created; returns
    it as an absolute path. ``what`` names it in the message (``"artifact folder"``)."""
    path = os.path.abspath(path)
    existing = _nearest_existing(path)
    if not os.path.isdir(existing):
        raise InputError(f"cannot write the {what} {path}: {existing} is a file, not a folder")
    try:
        if existing == path:
            tempfile.TemporaryFile(dir=path).close()
        else:
            os.rmdir(tempfile.mkdtemp(dir=existing))
    except OSError as err:
        raise InputError(f"cannot write the {what} {path}: nothing can be created in {existing} "
                         f"({err.strerror})") from None
    return path


def check_file(path: str, what: str) -> str:
    """Raise :class:`InputError` unless ``path`` can be written as a file in an existing folder; returns it
    as an absolute path. ``what`` names it in the message (``"report"``)."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        raise InputError(f"cannot write the {what} {path}: it is a folder")
    if not os.path.isdir(folder):
        existing = _nearest_existing(folder)
        reason = f"{existing} is a file, not a folder" if not os.path.isdir(existing) else f"no folder {folder}"
        raise InputError(f"cannot write the {what} {path}: {reason}")
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        raise InputError(f"cannot write the {what} {path}: nothing can be created in {folder} "
                         f"({err.strerror})") from None
    return path
