"""How a result file was made, recorded in every file the benchmarks write: the command line, the commit (and
whether the tree had uncommitted changes, the result files aside), the CPU model and the date."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time


def commit() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        status = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    # the result files a benchmark rewrites as it goes are not changes to what made them
    dirty = [line for line in status.splitlines() if not _is_result(line[3:])]
    return head + (" (with uncommitted changes)" if dirty else "")


def _is_result(path: str) -> bool:
    """Whether ``path`` (from the repository root) lies in a result folder: ``bench/results/`` or a study's."""
    return path.startswith("bench/results/") or (path.startswith("bench/studies/") and "/results/" in path)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


_STARTED_AT = commit()  # the code a benchmark runs is the code it started with, whatever is committed meanwhile


def stamp() -> dict:
    """``{"command", "commit", "cpu", "date"}`` of this process: the commit when it started, the date now."""
    return {"command": " ".join([os.path.basename(sys.executable), *sys.argv]), "commit": _STARTED_AT,
            "cpu": cpu_model(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def stamped(results: dict | list) -> dict:
    """``results`` with a ``provenance`` entry (:func:`stamp`) first; a list becomes the entry ``rows``."""
    return {"provenance": stamp(), **(results if isinstance(results, dict) else {"rows": results})}
