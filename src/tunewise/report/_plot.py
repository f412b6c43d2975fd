"""Plots of one or several runs (matplotlib, no global pyplot state).

Four panels: model-latency estimate against tuning time, every run on the same axes (how schedulers compare);
each task's best latency against its trials; tuning time spent per task; failed candidates per task.
"""

from __future__ import annotations

import math

from tunewise.report._summary import RunSummary

_STYLES = ("-", "--", ":", "-.")
_MAX_TASK_CURVES = 10  # the tasks with the largest share of the model latency get a curve


def _task_names(summaries: list[RunSummary]) -> list[str]:
    names: list[str] = []
    for s in summaries:
        names += [t.name for t in s.tasks if t.name not in names]
    return names


def _grouped_bars(ax, summaries: list[RunSummary], value, xlabel: str) -> None:
    names = _task_names(summaries)
    height, largest = 0.8 / max(1, len(summaries)), 0.0
    for i, s in enumerate(summaries):
        by_name = {t.name: value(t) for t in s.tasks}
        ax.barh([k + i * height for k in range(len(names))], [by_name.get(n, 0) for n in names], height,
                label=f"run {s.run.id}")
        largest = max([largest, *by_name.values()])
    ax.set_yticks([k + 0.4 - height / 2 for k in range(len(names))], [n[:28] for n in names], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_xlim(0, 1.05 * largest or 1)
    ax.xaxis.get_major_locator().set_params(integer=True)
    if len(summaries) > 1:
        ax.legend(fontsize=7)


def figure(summaries: list[RunSummary]):
    """The report figure of ``summaries`` (a ``matplotlib.figure.Figure``)."""
    from matplotlib.figure import Figure

    names = _task_names(summaries)
    bars = max(3.0, 0.22 * len(names) * len(summaries))
    fig = Figure(figsize=(13, 5 + bars), layout="constrained")
    (curve_ax, task_ax), (time_ax, fail_ax) = fig.subplots(2, 2, height_ratios=[5, bars])

    for s in summaries:
        points = [(t, v * 1e3) for t, v in s.curve if math.isfinite(v)]
        if points:
            times, latencies = zip(*points, strict=True)
            curve_ax.step(times, latencies, where="post", marker=".", label=s.label)
    curve_ax.set(xlabel="tuning time (s)", ylabel="model latency estimate (ms)",
                 title="model latency vs tuning time")
    curve_ax.grid(alpha=0.3)
    curve_ax.legend(fontsize=8)

    colors = {name: f"C{k % 10}" for k, name in enumerate(names)}
    for i, s in enumerate(summaries):
        for t in sorted(s.tasks, key=lambda t: -t.latency_share)[:_MAX_TASK_CURVES]:
            points = [(n, v * 1e3) for n, v in t.curve if math.isfinite(v)]
            if points:
                xs, ys = zip(*points, strict=True)
                task_ax.step(xs, ys, where="post", color=colors[t.name], linestyle=_STYLES[i % len(_STYLES)],
                             label=t.name[:28] if i == 0 else None)
    if len(summaries) > 1:  # the legend names the runs' line styles too
        for i, s in enumerate(summaries):
            task_ax.plot([], [], color="black", linestyle=_STYLES[i % len(_STYLES)], label=f"run {s.run.id}")
    task_ax.set(xlabel="trials of the task", ylabel="best latency (ms)", yscale="log", title="per-task best latency")
    task_ax.grid(alpha=0.3, which="both")
    task_ax.legend(fontsize=6, ncol=2)

    _grouped_bars(time_ax, summaries, lambda t: t.seconds, "tuning time spent (s)")
    time_ax.set_title("time spent per task")
    _grouped_bars(fail_ax, summaries, lambda t: t.failures, "failed candidates")
    fail_ax.set_title("failures per task")
    return fig
