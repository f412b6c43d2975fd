"""Plots of one or several runs (matplotlib, no global pyplot state).

Four panels: model-latency estimate against tuning time, every run on the same axes (how schedulers compare);
the best latency of the heaviest tasks against their trials, each task one colour named in the legend;
tuning time spent per task; failed candidates per task.
"""

from __future__ import annotations

import math

from tunewise.report._summary import RunSummary
from tunewise.report._text import task_label

_STYLES = ("-", "--", ":", "-.")
#: The tasks with the largest share of the model latency (in any run) that get a curve, each its own colour.
MAX_TASK_CURVES = 10


def _task_indices(summaries: list[RunSummary]) -> dict[str, int]:
    """Every task name of ``summaries`` (in order of appearance) with its index in the first run that has it."""
    indices: dict[str, int] = {}
    for s in summaries:
        indices.update({t.name: t.index for t in s.tasks if t.name not in indices})
    return indices


def heaviest_tasks(summaries: list[RunSummary], count: int = MAX_TASK_CURVES) -> list[str]:
    """The names of the ``count`` tasks with the largest share of the model latency in any of ``summaries``,
    largest first."""
    share: dict[str, float] = {}
    for s in summaries:
        for t in s.tasks:
            share[t.name] = max(share.get(t.name, 0.0), t.latency_share)
    return sorted(share, key=lambda name: -share[name])[:count]


def _task_curves(ax, summaries: list[RunSummary]) -> None:
    """Each of the heaviest tasks' best latency against its trials, from its default schedule (trial 0): one
    colour and one legend entry per task (its index and name), one line style per run."""
    from matplotlib.lines import Line2D

    shown, indices = heaviest_tasks(summaries), _task_indices(summaries)
    for i, s in enumerate(summaries):
        for t in sorted((t for t in s.tasks if t.name in shown), key=lambda t: shown.index(t.name)):
            points = [(n, v * 1e3) for n, v in ((0, t.default_latency), *t.curve) if math.isfinite(v)]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.step(xs, ys, where="post", color=f"C{shown.index(t.name)}", linestyle=_STYLES[i % len(_STYLES)])
    handles = [Line2D([], [], color=f"C{k}", label=task_label(indices[name], name)) for k, name in enumerate(shown)]
    if len(summaries) > 1:  # the legend names the runs' line styles too
        handles += [Line2D([], [], color="black", linestyle=_STYLES[i % len(_STYLES)], label=f"run {s.run.id}")
                    for i, s in enumerate(summaries)]
    heaviest = f" (the {len(shown)} heaviest of {len(indices)} tasks)" if len(shown) < len(indices) else ""
    ax.set(xlabel="trials of the task (0: default schedule)", ylabel="best latency (ms)", yscale="log",
           title="per-task best latency" + heaviest)
    ax.grid(alpha=0.3, which="both")
    ax.legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes


def _grouped_bars(ax, summaries: list[RunSummary], value, xlabel: str) -> None:
    indices = _task_indices(summaries)
    names = list(indices)
    height, largest = 0.8 / max(1, len(summaries)), 0.0
    for i, s in enumerate(summaries):
        by_name = {t.name: value(t) for t in s.tasks}
        ax.barh([k + i * height for k in range(len(names))], [by_name.get(n, 0) for n in names], height,
                label=f"run {s.run.id}")
        largest = max([largest, *by_name.values()])
    ax.set_yticks([k + 0.4 - height / 2 for k in range(len(names))], [task_label(indices[n], n) for n in names],
                  fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_xlim(0, 1.05 * largest or 1)
    ax.xaxis.get_major_locator().set_params(integer=True)
    if len(summaries) > 1:
        ax.legend(fontsize=7)


def figure(summaries: list[RunSummary]):
    """The report figure of ``summaries`` (a ``matplotlib.figure.Figure``)."""
    from matplotlib.figure import Figure

    bars = max(3.0, 0.22 * len(_task_indices(summaries)) * len(summaries))
    fig = Figure(figsize=(13, 5 + bars), layout="constrained")
    (curve_ax, task_ax), (time_ax, fail_ax) = fig.subplots(2, 2, height_ratios=[5, bars])

    for s in summaries:
        points = [(t, v * 1e3) for t, v in s.curve if math.isfinite(v)]
        if points:
            times, latencies = zip(*points, strict=True)
            line, = curve_ax.step(times, latencies, where="post", marker=".", label=s.label)
        checks = [(m.elapsed, m.latency * 1e3) for m in s.measured if math.isfinite(m.latency)]
        if checks:
            curve_ax.plot(*zip(*checks, strict=True), "s", color=line.get_color() if points else None,
                          label=f"{s.label}: measured while tuning")
    curve_ax.set(xlabel="tuning time (s)", ylabel="model latency (ms)",
                 title="model latency vs tuning time")
    curve_ax.grid(alpha=0.3)
    curve_ax.legend(fontsize=8)

    _task_curves(task_ax, summaries)

    _grouped_bars(time_ax, summaries, lambda t: t.seconds, "tuning time spent (s)")
    time_ax.set_title("time spent per task")
    _grouped_bars(fail_ax, summaries, lambda t: t.failures, "failed candidates")
    fail_ax.set_title("failures per task")
    return fig
