"""Reports of tuning runs, read from the store: tables (``tunewise runs``/``show``), an interactive HTML page
(plotly) and a static figure (matplotlib) (``report``).

>>> from tunewise import stores
>>> store = stores.create("sqlite://")
>>> run = store.create_run("tiny-mlp", "{}", "gradient", {})
>>> summarize(store, run).trials
0
"""

from __future__ import annotations

from tunewise.errors import InputError
from tunewise.report._html import (
    COMPILED,
    failure_kind,
    failures_figure,
    latency_figure,
    task_figure,
    timeline_figure,
    write_page,
)
from tunewise.report._plot import figure, heavy_tasks
from tunewise.report._summary import Failure, RunSummary, TaskSummary, summarize
from tunewise.report._text import base_line, check_text, pretrained_line, run_table, runs_table

__all__ = ["COMPILED", "Failure", "RunSummary", "TaskSummary", "base_line", "check_text", "failure_kind",
           "failures_figure", "figure", "heavy_tasks", "latency_figure", "pretrained_line", "run_table", "runs_table",
           "summarize",
           "task_figure", "timeline_figure", "write", "write_page"]

#: The file name endings :func:`write` takes.
SUFFIXES = (".html", ".png", ".svg", ".pdf")


def check_suffix(path: str) -> None:
    """Raise :class:`InputError` unless ``path`` ends with one of :data:`SUFFIXES`."""
    if not path.endswith(SUFFIXES):
        raise InputError(f"cannot write a report to {path}: name an .html, .png, .svg or .pdf file")


def write(summaries: list[RunSummary], path: str) -> str:
    """Write the report of ``summaries`` to ``path``: the interactive page (``.html``, :func:`write_page`: the
    plotly.js bundle is written beside it) or the static figure (``.png``, ``.svg``, ``.pdf``,
    :func:`figure`). Returns ``path``."""
    check_suffix(path)
    if path.endswith(".html"):
        return write_page(summaries, path)
    figure(summaries).savefig(path, dpi=110)
    return path
