"""The static report figure of one or several runs (matplotlib, no global pyplot state).

On top, the model latency against tuning time on a log axis, every run on the same axes, each its own
colour: its estimate, the whole-model checks (squares), its latest shown forecast (a band), the compiled
model of its artifacts (a diamond), the references its artifacts timed (onnxruntime, PyTorch eager: horizontal
lines) and its latency goal (a dashed line). Below, one small panel per task that holds much of the latency
(:func:`heavy_tasks`): its best latency against its trials, every run in its colour; and, only where candidates
failed, the failures of the tasks that had them. The figure fits a screen at the report's 110 dpi (at most
:data:`WIDTH` x :data:`MAX_HEIGHT` inches).
"""

from __future__ import annotations

import math

from tunewise.report._summary import RunSummary
from tunewise.report._text import short

#: Per-task panels: at most this many tasks, the heaviest first, until they hold :data:`TASK_SHARE` of the
#: model latency.
MAX_TASK_PANELS = 8
TASK_SHARE = 0.8
_COLUMNS = 4
WIDTH, _TOP, _ROW = 13.0, 4.2, 2.2  # inches: the figure's width, the latency plot's height, a row of panels'
MAX_HEIGHT = _TOP + 3 * _ROW
#: The references an artifact's metadata may hold, by key: drawn as horizontal lines.
REFERENCES = (("onnxruntime_latency_s", "onnxruntime", ":"), ("torch_eager_latency_s", "PyTorch eager", "-."))


def heavy_tasks(summaries: list[RunSummary], share: float = TASK_SHARE, most: int = MAX_TASK_PANELS) -> list[str]:
    """The names of the tasks that hold most of the model latency: by their largest share in any of
    ``summaries``, largest first, until together they hold ``share`` of it, at most ``most`` of them."""
    shares: dict[str, float] = {}
    for s in summaries:
        for t in s.tasks:
            shares[t.name] = max(shares.get(t.name, 0.0), t.latency_share)
    names, held = [], 0.0
    for name in sorted(shares, key=lambda n: -shares[n]):
        if held >= share or len(names) == most:
            break
        names.append(name)
        held += shares[name]
    return names


def _latency_plot(ax, summaries: list[RunSummary]) -> None:
    for i, s in enumerate(summaries):
        color = f"C{i}"
        points = [(t, v * 1e3) for t, v in s.curve if math.isfinite(v)]
        if points:
            ax.step(*zip(*points, strict=True), where="post", color=color, marker=".", markersize=3,
                    label=f"{s.label}: estimate")
        checks = [(m.elapsed, m.latency * 1e3) for m in s.measured if math.isfinite(m.latency)]
        if checks:
            ax.plot(*zip(*checks, strict=True), "s", color=color, markeredgecolor="black",
                    label=f"run {s.run.id}: whole-model checks")
        forecasts = s.forecasts()
        if forecasts:
            f = forecasts[-1]
            ax.fill_between(f.times, [v * 1e3 for v in f.low], [v * 1e3 for v in f.high], color=color, alpha=0.15,
                            linewidth=0, label=f"run {s.run.id}: forecast at {f.elapsed:.0f} s (80 %)")
        compiled = [((a.metadata.get("latency_estimate_history") or [[s.elapsed]])[-1][0], a.metadata["latency_s"])
                    for a in s.artifacts if _finite(a.metadata.get("latency_s"))]
        if compiled:
            at, latency = compiled[-1]
            ax.plot(at, latency * 1e3, "D", color=color, markeredgecolor="black",
                    label=f"run {s.run.id}: compiled model, {latency * 1e3:.4g} ms")
        for key, name, style in REFERENCES:
            latency = next((a.metadata[key] for a in reversed(s.artifacts) if _finite(a.metadata.get(key))), None)
            if latency is not None:
                ax.axhline(latency * 1e3, color=color, linestyle=style, linewidth=1,
                           label=f"run {s.run.id}: {name}, {latency * 1e3:.4g} ms")
        if s.goal is not None:
            ax.axhline(s.goal * 1e3, color=color, linestyle="--", linewidth=1.5,
                       label=f"run {s.run.id}: goal {s.goal * 1e3:.4g} ms")
    ax.set(xlabel="tuning time (s)", ylabel="model latency (ms, log scale)", yscale="log",
           title="model latency vs tuning time")
    _plain_log_ticks(ax)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _task_panel(ax, summaries: list[RunSummary], name: str) -> None:
    """One task's best latency against its trials, from its default schedule (trial 0), in each run's colour;
    its title gives its largest share of the model latency and the tuning time each run spent on it."""
    found = [(i, t) for i, s in enumerate(summaries) for t in s.tasks if t.name == name]
    for i, task in found:
        points = [(n, v * 1e3) for n, v in ((0, task.default_latency), *task.curve) if math.isfinite(v)]
        if points:
            ax.step(*zip(*points, strict=True), where="post", color=f"C{i}", marker=".", markersize=4)
    if not any(task.curve for _, task in found):
        defaults = ", ".join(f"{t.default_latency * 1e3:.4g} ms" for _, t in found if math.isfinite(t.default_latency))
        ax.text(0.5, 0.5, f"not tuned: its default schedule{', ' + defaults if defaults else ''}",
                transform=ax.transAxes, ha="center", va="center", fontsize=7)
        ax.set_xlim(-0.5, 1.5)
    share = max(t.latency_share for _, t in found)
    spent = ", ".join(f"{t.seconds:.0f} s" for _, t in found)
    ax.set_title(f"#{found[0][1].index} {short(name, 34)}\n{100 * share:.0f} % of the latency, {spent} of tuning",
                 fontsize=7)
    ax.set_yscale("log")
    _plain_log_ticks(ax)
    ax.tick_params(which="both", labelsize=6)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3, which="both")
    ax.set_xlabel("trials (0: default)", fontsize=6)
    ax.set_ylabel("best (ms)", fontsize=6)


def _failures_panel(ax, summaries: list[RunSummary]) -> None:
    """Failed candidates of the tasks that had any (the most failing first, at most 8), one bar per run."""
    counts: dict[str, dict[int, int]] = {}
    for i, s in enumerate(summaries):
        for t in s.tasks:
            if t.failures:
                counts.setdefault(f"#{t.index} {short(t.name, 22)}", {})[i] = t.failures
    names = sorted(counts, key=lambda n: -max(counts[n].values()))[:MAX_TASK_PANELS]
    height = 0.8 / len(summaries)
    for i in range(len(summaries)):
        ax.barh([k + i * height for k in range(len(names))], [counts[n].get(i, 0) for n in names], height,
                color=f"C{i}")
    ax.set_yticks([k + 0.4 - height / 2 for k in range(len(names))], names, fontsize=6)
    ax.set_ylim(-0.5, max(len(names), 4) - 0.5)  # bars as thin as four tasks' would be
    ax.invert_yaxis()
    ax.set_xlabel("failed candidates", fontsize=6)
    ax.tick_params(labelsize=6)
    ax.xaxis.get_major_locator().set_params(integer=True)
    total = sum(s.failures for s in summaries)
    ax.set_title(f"failed candidates ({total} in all)", fontsize=7)


def figure(summaries: list[RunSummary]):
    """The report figure of ``summaries`` (a ``matplotlib.figure.Figure``)."""
    from matplotlib.figure import Figure

    tasks = heavy_tasks(summaries)
    failed = any(s.failures for s in summaries)
    cells = len(tasks) + failed
    rows = math.ceil(cells / _COLUMNS)
    fig = Figure(figsize=(WIDTH, _TOP + rows * _ROW), layout="constrained")
    if not rows:
        _latency_plot(fig.add_subplot(), summaries)
        return fig
    top, below = fig.subfigures(2, 1, height_ratios=[_TOP, rows * _ROW])
    _latency_plot(top.add_subplot(), summaries)
    grid = below.add_gridspec(rows, _COLUMNS)
    for k, name in enumerate(tasks):
        _task_panel(below.add_subplot(grid[k // _COLUMNS, k % _COLUMNS]), summaries, name)
    if failed:
        _failures_panel(below.add_subplot(grid[len(tasks) // _COLUMNS, len(tasks) % _COLUMNS]), summaries)
    if tasks:
        total = len({t.name for s in summaries for t in s.tasks})
        held = max(sum(t.latency_share for t in s.tasks if t.name in tasks) for s in summaries)
        below.suptitle(f"best latency per task: the {len(tasks)} of {total} tasks that hold {100 * held:.0f} % of "
                       "the model latency", fontsize=9)
    return fig


def _plain_log_ticks(ax) -> None:
    """A log y axis labelled in plain numbers, at 1, 2 and 5 times the powers of ten, or closer where the axis
    spans less than a decade (a task's curve often spans less than 2x), or only at the powers of ten where it
    spans more than three."""
    from matplotlib import ticker

    low, high = ax.get_ylim()
    span = high / low if low > 0 else math.inf
    subs = (1.0,) if span > 1e3 else (1.0, 2.0, 5.0) if span > 10 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    ax.yaxis.set_major_locator(ticker.LogLocator(subs=subs))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:.3g}"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())


def _finite(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0
