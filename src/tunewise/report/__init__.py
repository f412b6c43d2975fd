"""Reports of tuning runs, read from the store: tables (``tunewise runs``/``show``) and plots (``report``).

>>> from tunewise import stores
>>> store = stores.create("sqlite://")
>>> run = store.create_run("tiny-mlp", "{}", "gradient", {})
>>> summarize(store, run).trials
0
"""

from __future__ import annotations

import base64
import html
import io

from tunewise.errors import InputError
from tunewise.report._plot import figure
from tunewise.report._summary import RunSummary, TaskSummary, summarize
from tunewise.report._text import run_table, runs_table

__all__ = ["RunSummary", "TaskSummary", "figure", "run_table", "runs_table", "summarize", "write"]


def write(summaries: list[RunSummary], path: str) -> str:
    """Write the report of ``summaries`` to ``path``: an HTML page (``.html``: each run's table and the
    figure) or the figure alone (``.png``, ``.svg``, ``.pdf``). Returns ``path``."""
    if not path.endswith((".html", ".png", ".svg", ".pdf")):
        raise InputError(f"cannot write a report to {path}: name an .html, .png, .svg or .pdf file")
    fig = figure(summaries)
    if not path.endswith(".html"):
        fig.savefig(path, dpi=110)
        return path
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    tables = "\n".join(f"<h2>{html.escape(s.label)}</h2>\n<pre>{html.escape(chr(10).join(run_table(s)))}</pre>"
                       for s in summaries)
    with open(path, "w") as f:
        f.write(f"<!doctype html>\n<html><head><meta charset='utf-8'><title>tunewise report</title></head>\n"
                f"<body>\n<h1>tunewise report</h1>\n"
                f"<img alt='report plots' src='data:image/png;base64,{base64.b64encode(png.getvalue()).decode()}'>\n"
                f"{tables}\n</body></html>\n")
    return path
