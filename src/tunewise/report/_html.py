"""The interactive HTML report (plotly): a page that works offline, its plotly.js bundle a file beside it.

The page holds a figure of the runs' model latency against tuning time (log axis) with the whole-model checks,
the compiled latencies of their artifacts and their goals, then per run a header (settings, target, CPU,
status), the per-task best-latency curves (those of the tasks that hold most of the latency drawn, the others
a click away), the timeline of the scheduler's slots and, where candidates failed, the failures by kind: the
same choices as the static figure (:func:`tunewise.report.figure`). Each figure is plotly's JSON in a
``<script type="application/json" class="tunewise-figure">`` element; the page draws them with the bundle
``plotly-VERSION.min.js`` of the same folder, written once per folder and plotly version.
"""

from __future__ import annotations

import html
import json
import math
import os
import time
from collections import Counter

from tunewise import energy, infinity
from tunewise.delivery.destinations import check_file
from tunewise.report._plot import heavy_tasks
from tunewise.report._summary import RunSummary
from tunewise.report._text import run_table, short, task_label

#: Compiled latencies an artifact's metadata holds: key, name, whether it is tunewise's own (TVM) model.
COMPILED = (("untuned_latency_s", "untuned TVM", True), ("latency_s", "tuned TVM", True),
            ("torch_eager_latency_s", "PyTorch eager", False), ("onnxruntime_latency_s", "onnxruntime", False),
            ("openvino_latency_s", "OpenVINO", False), ("openvino_f32_latency_s", "OpenVINO f32", False),
            ("cuda_graph_latency_s", "CUDA graph (1 stream)", False), ("aot_latency_s", "tunewise.runtime.aot", False))
_FAILURE_NAMES = {"build": "build errors", "run": "run errors", "timeout": "timeouts"}


def _color(i: int) -> str:
    from plotly.colors import qualitative

    return qualitative.Plotly[i % len(qualitative.Plotly)]


def failure_kind(kind: str) -> str:
    """The name of a group of failures of ``kind`` (a trial's stored error): ``build errors``, ``timeouts``."""
    return _FAILURE_NAMES.get(kind, f"{kind} errors")


def _ms(seconds) -> float | None:
    return None if seconds is None else infinity.to_json(seconds * 1e3)


def _artifact_time(summary: RunSummary, metadata) -> float:
    """The tuning time after which an artifact was compiled: the last point of its estimate history."""
    history = metadata.get("latency_estimate_history")
    return float(history[-1][0]) if history else summary.elapsed


def latency_figure(summaries: list[RunSummary]):
    """Model latency against tuning time: each run's estimate from its checkpoints (a step line), its forecasts
    (:meth:`RunSummary.forecasts`: the 80 % band and the median as they stood at several moments of the
    run), the whole-model latencies measured while tuning (squares), and the latencies measured on its compiled
    artifacts: untuned TVM at time 0, tuned TVM when it was compiled, the
    references (PyTorch eager, onnxruntime) as dotted lines to that time; its latency goal as a dashed line.
    A run without an artifact has its estimate (and goal) only."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, s in enumerate(summaries):
        group, color = f"run {s.run.id}", _color(i)
        points = [(t, v * 1e3) for t, v in s.curve if math.isfinite(v)]
        fig.add_scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines+markers", line_shape="hv",
                        name=f"{group}: latency estimate", legendgroup=group, line_color=color,
                        hovertemplate=f"{html.escape(s.label)}<br>after %{{x:.1f}} s: %{{y:.4f}} ms"
                                      "<extra>estimate</extra>")
        checks = [(m.elapsed, m.latency * 1e3) for m in s.measured if math.isfinite(m.latency)]
        if checks:
            fig.add_scatter(x=[c[0] for c in checks], y=[c[1] for c in checks], mode="markers",
                            name=f"{group}: measured while tuning", legendgroup=group,
                            marker={"color": color, "size": 10, "symbol": "square"},
                            hovertemplate="compiled and timed after %{x:.1f} s: %{y:.4f} ms"
                                          f"<extra>{group}</extra>")
        for key, name, own in COMPILED:
            xs, ys, paths = [], [], []
            for artifact in s.artifacts:
                latency = _ms(artifact.metadata.get(key))
                if latency is None:
                    continue
                end = _artifact_time(s, artifact.metadata)
                if own:
                    xs.append(0.0 if key == "untuned_latency_s" else end)
                    ys.append(latency)
                    paths.append(artifact.path)
                else:  # a segment over the tuning time, broken between artifacts
                    xs += [0.0, end, None]
                    ys += [latency, latency, None]
                    paths += [artifact.path, artifact.path, None]
            if not xs:
                continue
            fig.add_scatter(x=xs, y=ys, name=f"{group}: {name}" + (" (compiled)" if own else ""), legendgroup=group,
                            mode="markers" if own else "lines+markers", customdata=paths,
                            line={"color": color, "dash": "dot"},
                            marker={"color": color, "size": 11 if own else 7,
                                    "symbol": ("diamond" if key == "latency_s" else "x") if own else "circle"},
                            hovertemplate=f"{name}: %{{y:.4f}} ms<br>artifact %{{customdata}}"
                                          f"<extra>{group}</extra>")
        for f in s.forecasts():
            _forecast_band(fig, f, group, color)
        if s.goal is not None:
            fig.add_scatter(x=[0.0, max([s.elapsed, *(f.budget_end for f in s.forecasts())])],
                            y=[s.goal * 1e3] * 2, mode="lines", name=f"{group}: goal", legendgroup=group,
                            line={"color": color, "dash": "dash", "width": 1.5},
                            hovertemplate=f"goal {s.goal * 1e3:.4g} ms<extra>{group}</extra>")
    fig.update_layout(title="model latency vs tuning time", xaxis_title="tuning time (s)",
                      yaxis={"title": "latency (ms, log scale)", "type": "log"}, hovermode="closest",
                      legend={"title": "click to hide, double-click to isolate", "groupclick": "toggleitem"},
                      height=520)
    return fig


def _forecast_band(fig, forecast, group: str, color: str) -> None:
    """The forecast made after ``forecast.slot``: its 80 % band (shaded) and median (dashed) from then to the
    budget's end."""
    times, name = list(forecast.times), f"{group}: forecast at {forecast.elapsed:.0f} s"
    fig.add_scatter(x=times, y=[v * 1e3 for v in forecast.high], mode="lines", line={"width": 0, "color": color},
                    legendgroup=group, showlegend=False, hoverinfo="skip")
    fig.add_scatter(x=times, y=[v * 1e3 for v in forecast.low], mode="lines", fill="tonexty", opacity=0.2,
                    line={"width": 0, "color": color}, legendgroup=group, name=f"{name} (80 %)",
                    hoverinfo="skip")
    fig.add_scatter(x=times, y=[v * 1e3 for v in forecast.median], mode="lines", name=name, legendgroup=group,
                    line={"color": color, "dash": "dash", "width": 1},
                    hovertemplate=f"forecast made at {forecast.elapsed:.0f} s<br>%{{x:.0f}} s: ~%{{y:.4f}} ms"
                                  f"<extra>{group}</extra>")


def task_figure(summary: RunSummary):
    """Each task's best latency against its trials, one line per task from its default schedule (trial 0),
    heaviest task (largest share of the model latency) first; every line named in the legend (which
    scrolls), the full task name in its hover text. Only the tasks that hold most of the latency
    (:func:`tunewise.report.heavy_tasks`) are drawn; the others show on a click in the legend."""
    import plotly.graph_objects as go

    fig = go.Figure()
    tasks = sorted(summary.tasks, key=lambda t: (-t.latency_share, t.index))
    heavy = heavy_tasks([summary])
    for k, t in enumerate(tasks):
        points = [(0, _ms(t.default_latency)), *((n, _ms(v)) for n, v in t.curve)]
        label = task_label(t.index, t.name) + ("" if t.curve else " (not tuned)")
        fig.add_scatter(x=[n for n, _ in points], y=[v for _, v in points], mode="lines+markers", line_shape="hv",
                        name=label, line_color=_color(k), marker_size=4, connectgaps=True,
                        visible=True if t.name in heavy else "legendonly",
                        hovertemplate=f"<b>{html.escape(t.name)}</b><br>task {t.index}, weight {t.weight}, "
                                      f"{100 * t.latency_share:.1f}% of the model latency<br>"
                                      "trial %{x}: best %{y:.4f} ms<extra></extra>")
    held = sum(t.latency_share for t in tasks if t.name in heavy)
    fig.update_layout(title=f"per-task best latency: the {len(heavy)} of {len(tasks)} tasks that hold "
                            f"{100 * held:.0f} % of the latency (the others: click them in the legend)",
                      xaxis_title="trials of the task (0: default schedule)",
                      yaxis={"title": "best latency (ms, log scale)", "type": "log"},
                      legend={"title": "tasks: click to hide, double-click to isolate", "font": {"size": 10}},
                      height=min(1400, max(500, 19 * len(tasks) + 140)))
    return fig


def timeline_figure(summary: RunSummary):
    """The scheduler's choices: one bar per slot, on the row of the task it went to, over the tuning time it
    took; grey bars are slots that found the task's search space exhausted."""
    import plotly.graph_objects as go

    names = {t.index: t.name for t in summary.tasks}
    rows = [task_label(t.index, t.name) for t in summary.tasks]
    slots = summary.checkpoints
    fig = go.Figure(go.Bar(
        name="slots", orientation="h", x=[c.seconds for c in slots],
        base=[max(0.0, c.elapsed - c.seconds) for c in slots],
        y=[task_label(c.task, names.get(c.task, "?")) for c in slots],
        marker_color=[_color(0) if c.trials else "lightgrey" for c in slots],
        customdata=[[c.slot, names.get(c.task, "?"), c.trials, _ms(c.latency), c.elapsed] for c in slots],
        hovertemplate="slot %{customdata[0]}: <b>%{customdata[1]}</b><br>%{customdata[2]} trials in %{x:.2f} s, "
                      "ending at %{customdata[4]:.1f} s<br>model estimate after it: %{customdata[3]:.4f} ms"
                      "<extra></extra>"))
    fig.update_layout(title=f"scheduler timeline (slots: {len(slots)})", xaxis_title="tuning time (s)",
                      yaxis={"categoryorder": "array", "categoryarray": rows, "autorange": "reversed",
                             "tickfont": {"size": 10}},
                      height=min(1400, max(300, 18 * len(rows) + 140)), showlegend=False)
    return fig


def failures_figure(summary: RunSummary):
    """Failed candidates by kind (build errors, run errors, timeouts, ...): stacked bars per task, one trace
    per kind; the hover text gives the task's full name and its most frequent messages of that kind."""
    import plotly.graph_objects as go

    names = {t.index: t.name for t in summary.tasks}
    by_kind: dict[str, dict[int | None, Counter]] = {}
    for f in summary.failed:
        by_kind.setdefault(f.kind, {}).setdefault(f.task, Counter())[f.message.strip() or "(no message)"] += 1
    fig = go.Figure()
    for kind, tasks in sorted(by_kind.items(), key=lambda item: -sum(map(Counter.total, item[1].values()))):
        order = sorted(tasks, key=lambda task: (task is None, task or 0))
        labels = [task_label(task, names.get(task, "?")) if task is not None else "imported records" for task in order]
        hover = [[names.get(task, "imported records"),
                  "<br>".join(f"{n} × {html.escape(short(m, 100))}" for m, n in tasks[task].most_common(3))]
                 for task in order]
        fig.add_bar(x=labels, y=[tasks[task].total() for task in order], name=failure_kind(kind), customdata=hover,
                    hovertemplate="<b>%{customdata[0]}</b><br>%{y} " + failure_kind(kind)
                                  + "<br>%{customdata[1]}<extra></extra>")
    fig.update_layout(title=f"failed candidates by kind ({len(summary.failed)} of {summary.trials} trials)",
                      barmode="stack", yaxis_title="failed candidates", xaxis={"tickfont": {"size": 10}}, height=420,
                      legend={"title": "kind"})
    return fig


def _cpu(target: str) -> str:
    """The CPU a target names (its ``mcpu`` and core count, or its host's), ``-`` when it names none."""
    try:
        config = json.loads(target)
    except ValueError:
        return "-"
    if isinstance(config, dict) and config.get("kind") != "llvm":
        config = config.get("host")
    if not isinstance(config, dict) or not ("mcpu" in config or "num-cores" in config):
        return "-"
    cores = f", {config['num-cores']} cores" if "num-cores" in config else ""
    return f"{config.get('mcpu', 'generic')}{cores}"


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))


def header(summary: RunSummary) -> list[tuple[str, str]]:
    """The ``(field, value)`` rows that head a run's part of the page: model, status, scheduler, target,
    CPU, times, trials, latencies (estimated, and compiled by its last artifact) and its settings."""
    r = summary.run
    rows = [("model", r.model), ("status", r.state()), ("scheduler", r.scheduler), ("target", r.target),
            ("CPU", _cpu(r.target)), ("created", _when(r.created)), ("updated", _when(r.updated)),
            ("trials", f"{summary.trials} ({summary.failures} failed) in {summary.elapsed:.1f} s of tuning"),
            ("latency estimate", f"{_fmt_ms(summary.untuned)} untuned -> {_fmt_ms(summary.estimate)} tuned")]
    if summary.measured:
        rows.append(("measured while tuning", ", ".join(
            f"{_fmt_ms(m.latency)} at {m.elapsed:.0f} s" if math.isfinite(m.latency) else f"failed at {m.elapsed:.0f} s"
            for m in summary.measured)))
    if summary.joules is not None:
        meter = r.settings.get("energy_meter")
        rows.append(("energy", f"{summary.joules / 1e3:.2f} kJ, metered by {meter} ({energy.describe(meter)})"))
    if summary.failures:
        rows.append(("failed candidates cost", f"{summary.waste_seconds:.1f} s"
                     + ("" if summary.waste_joules is None else f", {summary.waste_joules / 1e3:.2f} kJ")))
    if summary.artifacts:
        last = summary.artifacts[-1]
        rows.append(("artifact", last.path))
        rows += [(f"{name} (compiled)" if own else name, _fmt_ms(last.metadata.get(key)))
                 for key, name, own in COMPILED if last.metadata.get(key) is not None]
    else:
        rows.append(("artifact", "none: the run compiled no model"))
    rows += [(f"setting {key}", json.dumps(value)) for key, value in sorted(r.settings.items())]
    return rows


def _fmt_ms(seconds) -> str:
    latency = _ms(seconds)
    return "-" if latency is None else f"{latency:.4f} ms"


def plotly_js_name() -> str:
    """The file name of the plotly.js bundle the page loads: ``plotly-VERSION.min.js``."""
    from plotly.offline import get_plotlyjs_version

    return f"plotly-{get_plotlyjs_version()}.min.js"


def _write_plotly_js(folder: str) -> str:
    """Write the plotly.js bundle into ``folder`` unless it is there already; its path."""
    from plotly.offline import get_plotlyjs

    path = os.path.join(folder, plotly_js_name())
    if not os.path.isfile(path):
        check_file(path, "plotly.js bundle")
        part = f"{path}.{os.getpid()}.part"
        with open(part, "w", encoding="utf-8") as f:
            f.write(get_plotlyjs())
        os.replace(part, path)  # whole or absent, also with several reports written at once
    return path


def _figure_html(fig, key: str) -> str:
    data = fig.to_json().replace("</", "<\\/")  # a JSON string escape: no "</script>" inside the element
    return (f"<div class='figure' id='{key}'></div>\n"
            f"<script type='application/json' class='tunewise-figure' data-div='{key}'>{data}</script>\n")


def _run_html(summary: RunSummary) -> str:
    rid = summary.run.id
    rows = "\n".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in header(summary))
    table = html.escape("\n".join(run_table(summary)))
    return (f"<h2>{html.escape(summary.label)}</h2>\n<table class='header'>\n{rows}\n</table>\n"
            f"<details><summary>task table</summary><pre>{table}</pre></details>\n"
            + _figure_html(task_figure(summary), f"run{rid}-tasks")
            + _figure_html(timeline_figure(summary), f"run{rid}-timeline")
            + (_figure_html(failures_figure(summary), f"run{rid}-failures") if summary.failed
               else "<p>No candidate failed.</p>\n"))


_LOADER = """<script>
if (typeof Plotly === "undefined") {
  document.body.insertAdjacentHTML("afterbegin",
    "<p class='missing'>The plots need the file %s beside this page.</p>");
} else {
  for (const element of document.querySelectorAll("script.tunewise-figure")) {
    const figure = JSON.parse(element.textContent);
    Plotly.newPlot(element.dataset.div, figure.data, figure.layout, {responsive: true});
  }
}
</script>"""

_STYLE = """<style>
body { font-family: sans-serif; margin: 1em 2em; }
table.header th { text-align: left; padding-right: 1em; font-weight: normal; color: #555; }
table.header td { font-family: monospace; }
.missing { color: #b00; font-weight: bold; }
</style>"""


def write_page(summaries: list[RunSummary], path: str) -> str:
    """Write the HTML report of ``summaries`` to ``path`` and the plotly.js bundle beside it (once per folder);
    returns ``path``."""
    js = os.path.basename(_write_plotly_js(os.path.dirname(os.path.abspath(path))))
    runs = ", ".join(str(s.run.id) for s in summaries)
    body = _figure_html(latency_figure(summaries), "latency") + "".join(_run_html(s) for s in summaries)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"<!doctype html>\n<html><head><meta charset='utf-8'><title>tunewise report: runs {runs}</title>\n"
                f"{_STYLE}\n<script src='{html.escape(js)}'></script></head>\n<body>\n"
                f"<h1>tunewise report: runs {runs}</h1>\n{body}{_LOADER % html.escape(js)}\n</body></html>\n")
    return path
