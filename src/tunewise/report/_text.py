"""Plain-text tables of runs and of one run's tasks (what ``tunewise runs`` and ``tunewise show`` print), and the
labels of tasks in the plots."""

from __future__ import annotations

import math
import time
from collections import Counter

from tunewise import energy
from tunewise.report._summary import RunSummary


def ms(seconds: float) -> str:
    """Seconds as milliseconds with 3 decimals, ``-`` for inf."""
    return f"{seconds * 1e3:.3f}" if math.isfinite(seconds) else "-"


def check_text(point) -> str:
    """A whole-model check (:class:`~tunewise.stores.ModelLatency`) as a summary shows it, saying so where its
    latency was read from the previous check's model, its own time coming in a slow stretch of the machine
    (:func:`tunewise.tuning.model_checks.reading`)."""
    if not math.isfinite(point.latency):
        return f"failed at {point.elapsed:.0f}s ({point.message})"
    text = f"{ms(point.latency)} ms at {point.elapsed:.0f}s"
    if point.in_slow_stretch:
        text += f" (itself {ms(point.timed)} ms, in a slow stretch)"
    return text


def short(name: str, chars: int = 40) -> str:
    """``name`` cut in the middle to at most ``chars`` characters: task names that share a long prefix keep
    the suffix that tells them apart (``fused_conv2d_add_relu_3``)."""
    if len(name) <= chars:
        return name
    tail = (chars - 1) // 3
    return f"{name[:chars - 1 - tail]}…{name[-tail:]}"


def task_label(index: int, name: str) -> str:
    """A task's label in legends and on axes: its index and its name, :func:`short` ened."""
    return f"#{index} {short(name)}"


def _ago(timestamp: float) -> str:
    seconds = max(0.0, time.time() - timestamp)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"


def runs_table(summaries: list[RunSummary]) -> list[str]:
    """One line per run: id, state (:meth:`~tunewise.stores.Run.state`: its status, or ``dead``), model,
    scheduler, trials, tuning time, latency estimate, last write."""
    lines = [f"{'run':>4s}  {'status':11s} {'model':16s} {'scheduler':16s} {'trials':>7s} {'failed':>6s} "
             f"{'tuned s':>8s} {'untuned ms':>10s} {'estimate ms':>11s}  updated"]
    for s in summaries:
        r = s.run
        lines.append(f"{r.id:4d}  {r.state():11s} {r.model[-16:]:16s} {r.scheduler[:16]:16s} {s.trials:7d} "
                     f"{s.failures:6d} {s.elapsed:8.0f} {ms(s.untuned):>10s} {ms(s.estimate):>11s}  {_ago(r.updated)}")
    return lines


def base_line(tasks: int, of: int, setting: str | None) -> str:
    """How many of a run's ``of`` tasks started from a record base's records (``tasks``), and which base
    (``setting``: the run's ``records_base``)."""
    which = ("bundled records" if setting == "bundled" else "a record base's records" if setting is None
             else f"the records of {setting}")
    return f"{tasks} of {of} tasks started from {which} (measured here as trials of the run)"


def pretrained_line(tasks: int, of: int) -> str:
    """How many of a run's ``of`` tasks the pretrained cost model ranked from their first slot (``tasks``)."""
    return f"{tasks} of {of} tasks ranked by the pretrained cost model from their first slot"


def run_table(summary: RunSummary) -> list[str]:
    """A run's header and its per-task table: trials, failures, best latency, shares of latency and time."""
    r = summary.run
    estimate = (f"; model latency estimate {ms(summary.untuned)} -> {ms(summary.estimate)} ms "
                f"({summary.untuned / summary.estimate:.2f}x)" if 0 < summary.estimate < math.inf else "")
    if estimate and summary.calibrated != summary.estimate:
        estimate += f", {ms(summary.calibrated)} ms in the model as last checked"
    lines = [f"run {r.id}: {r.model} with {r.scheduler} on {r.target}",
             f"status {r.state()}; {summary.trials} trials ({summary.failures} failed) in {summary.elapsed:.0f}s"
             + estimate]
    if summary.joules is not None:
        meter = r.settings.get("energy_meter")
        phases = [c.phase_joules for c in summary.checkpoints if c.phase_joules is not None]
        split = ("; slots: " + ", ".join(f"{name} {sum(p[i] for p in phases) / 1e3:.2f} kJ"
                                         for i, name in enumerate(("search", "build", "measure"))) if phases else "")
        lines.append(f"energy {summary.joules / 1e3:.2f} kJ, metered by {meter} ({energy.describe(meter)})" + split)
    if summary.failures:
        kinds = Counter(f.kind for f in summary.failed)
        joules = "" if summary.waste_joules is None else f", {summary.waste_joules / 1e3:.2f} kJ"
        lines.append(f"failed candidates: {', '.join(f'{n} {kind}' for kind, n in sorted(kinds.items()))}; they "
                     f"cost {summary.waste_seconds:.1f}s of building and running{joules}")
    if summary.base_tasks:
        lines.append(base_line(summary.base_tasks, len(summary.tasks), r.settings.get("records_base")))
    skipped = sum(c.skipped for c in summary.checkpoints)
    if skipped:
        lines.append(f"{skipped} proposals skipped by the candidate filter ({r.settings.get('candidate_filter')})")
    if summary.measured:
        lines.append("model latency measured while tuning: " + ", ".join(map(check_text, summary.measured)))
    for f in summary.forecasts():
        lines.append(f"forecast after {f.elapsed:.0f}s (slot {f.slot}), budget end at {f.budget_end:.0f}s: {f.line()}")
    lines += [f"{'task':40s} {'weight':>6s} {'trials':>6s} {'failed':>6s} {'default ms':>10s} {'best ms':>9s} "
             f"{'latency %':>9s} {'time %':>7s}"]
    for t in summary.tasks:
        lines.append(f"{t.name[:40]:40s} {t.weight:6d} {t.trials:6d} {t.failures:6d} {ms(t.default_latency):>10s} "
                     f"{ms(t.best):>9s} {100 * t.latency_share:9.1f} {100 * t.time_share:7.1f}")
    return lines
