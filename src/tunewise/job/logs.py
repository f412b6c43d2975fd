"""Third-party output (TVM, PyTorch, ONNX, XGBoost) kept out of the terminal, in a log file.

While :func:`routed` is active (every ``tunewise`` command, :func:`tunewise.tune`, :func:`tunewise.resume`,
:func:`tunewise.load`):

- file descriptors 1 and 2 (TVM's C++ logging writes to 2) point at the log file, in child processes started
  meanwhile too; ``sys.stdout`` and ``sys.stderr`` are rebound to copies of the original descriptors, so
  tunewise's own output still reaches the terminal;
- Python warnings raised outside tunewise's code, what third-party code prints inside :func:`prints_routed`,
  and records of the loggers in :data:`THIRD_PARTY_LOGGERS` go to the log.

At the end a log that received anything is kept and named on standard error (``tunewise: third-party log:
PATH``, unless a :class:`~tunewise.errors.TunewiseError` ends the block); an empty one is removed. Logs go to
``$TUNEWISE_LOG_DIR``, by default ``tunewise-logs`` in the current folder, one file per command or call.
Nothing is routed when verbose (:func:`set_verbose`, ``tunewise --verbose``, ``TUNEWISE_DEBUG=1``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import sys
import tempfile
import time
import warnings

from tunewise.errors import TunewiseError

THIRD_PARTY_LOGGERS = ("tvm", "tvm_ffi", "torch", "onnx", "onnxruntime", "onnxscript", "xgboost", "ray",
                       "tunewise.tuning.search")  # the last: the logger tunewise hands TVM's search contexts
LOG_DIR_VARIABLE = "TUNEWISE_LOG_DIR"
DEFAULT_LOG_DIR = "tunewise-logs"

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # src/tunewise
_verbose: bool | None = None  # None: as TUNEWISE_DEBUG says
_active = False  # inside a routed() block, routing or not
_log = None  # the log file while a routed() block routes


def set_verbose(verbose: bool | None = True) -> None:
    """Let third-party output through to the terminal (``True``) or route it to a log file (``False``) in every
    later tunewise call of this process; ``None``: as ``TUNEWISE_DEBUG`` says (the default: routed unless
    it is set)."""
    global _verbose
    _verbose = verbose


def is_verbose() -> bool:
    """Whether third-party output goes to the terminal."""
    return _verbose if _verbose is not None else bool(os.environ.get("TUNEWISE_DEBUG"))


def _log_path(label: str) -> tuple[str, str | None]:
    """A new file for this process's third-party output, and the log folder if this call created it; in the
    temporary folder when the log folder cannot be created."""
    name = f"{time.strftime('%Y%m%d-%H%M%S')}-{label}-{os.getpid()}.log"
    folder = os.environ.get(LOG_DIR_VARIABLE) or DEFAULT_LOG_DIR
    created = None if os.path.isdir(folder) else folder
    try:
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, name)
        open(path, "a").close()
    except OSError:
        return os.path.join(tempfile.gettempdir(), f"tunewise-{name}"), None
    return path, created


def _writes_to(stream, fd: int) -> bool:
    try:
        return stream.fileno() == fd
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both of the last two
        return False


def _flush_native() -> None:
    """Flush C stdio buffers, so native output written so far lands where its descriptor points now."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def routed(label: str, *, verbose: bool | None = None):
    """Route third-party output to a new log file (see the module docstring) until the block ends; nothing
    when ``verbose`` (``None``: as :func:`is_verbose` says), and none in blocks inside it either way. ``label``
    names the file (``tune``, ``run``, ``load``...)."""
    global _active, _log
    if _active:
        yield
        return
    if is_verbose() if verbose is None else verbose:
        _active = True
        try:
            yield
        finally:
            _active = False
        return
    path, created = _log_path(label)
    log = open(path, "a", buffering=1, encoding="utf-8", errors="replace")
    saved, streams = {}, {}
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    loggers = [logging.getLogger(name) for name in THIRD_PARTY_LOGGERS]
    propagate = [logger.propagate for logger in loggers]
    show = warnings.showwarning

    def show_warning(message, category, filename, lineno, file=None, line=None):
        if os.path.abspath(filename).startswith(_PACKAGE):
            show(message, category, filename, lineno, file, line)
        else:
            log.write(warnings.formatwarning(message, category, filename, lineno, line))

    _active = True
    try:
        for fd, name in ((1, "stdout"), (2, "stderr")):
            stream = getattr(sys, name)
            if stream is not None:
                stream.flush()
            _flush_native()
            saved[fd] = os.dup(fd)
            os.dup2(log.fileno(), fd)
            if _writes_to(stream, fd):
                streams[name] = stream
                setattr(sys, name, open(saved[fd], "w", buffering=1, encoding=stream.encoding,
                                        errors=stream.errors, closefd=False))
        for logger in loggers:
            logger.addHandler(handler)
            logger.propagate = False
        warnings.showwarning = show_warning
        _log = log
        yield
    finally:
        _log = None
        warnings.showwarning = show
        for logger, kept in zip(loggers, propagate, strict=True):
            logger.removeHandler(handler)
            logger.propagate = kept
        _flush_native()
        for fd, name in ((1, "stdout"), (2, "stderr")):
            if name in streams:
                with contextlib.suppress(BrokenPipeError):  # its reader went away (`| head`)
                    getattr(sys, name).close()
                setattr(sys, name, streams[name])
            if fd in saved:
                os.dup2(saved[fd], fd)
                os.close(saved[fd])
        log.close()
        _active = False
        if os.path.getsize(path):
            if not isinstance(sys.exc_info()[1], TunewiseError):  # bad input: its error line is all there is
                print(f"tunewise: third-party log: {path}", file=sys.stderr)
        else:
            os.remove(path)
            if created is not None:
                with contextlib.suppress(OSError):  # another process's log may be there by now
                    os.rmdir(created)


@contextlib.contextmanager
def prints_routed():
    """Within the block, what is printed to ``sys.stdout`` goes to the log while a :func:`routed` block routes
    (and to ``sys.stdout`` as usual otherwise): for third-party Python code that prints instead of logging.
    TVM's ONNX importer prints each operator it fails to convert, "Error converting operator ...", also when
    the model is then imported another way."""
    if _log is None:
        yield
        return
    with contextlib.redirect_stdout(_log):
        yield


def quiet(label: str):
    """Decorator: the function's calls run :func:`routed` under ``label``."""

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            with routed(label):
                return function(*args, **kwargs)

        return wrapper

    return decorate
