"""The live progress display of ``tunewise tune`` and :func:`tunewise.tune` (rich): elapsed time, trials, the
model-latency estimate with its history as a sparkline (and scaled to the compiled model once a whole-model check
measured it), the tuning time left under the budget, the forecast
(:mod:`tunewise.forecast`, once calibrated) at the budget's end and to the goal, the slot in
flight (its task and phase) and the per-task table. Off a terminal it prints one unwrapped line per slot."""

from __future__ import annotations

import dataclasses
import math
import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from tunewise.callbacks._base import Callback
from tunewise.report._text import ms

_BARS = "▁▂▃▄▅▆▇█"
NAME_WIDTH = 48


def sparkline(values, width: int = 24, top: float | None = None) -> str:
    """``values`` (positive; the last ``width`` of them) as a line of block characters on a log scale whose top
    bar is ``top`` (default: the largest value) and whose bottom bar is the smallest value, or ``top / 2`` if
    that is lower: a 1 % gain moves a bar by at most one step, a 2x or larger gain spans the whole range."""
    values = [v for v in values if 0 < v < math.inf][-width:]
    if not values:
        return ""
    high = max(values) if top is None or not 0 < top < math.inf else max(top, max(values))
    low = min(min(values), high / 2)
    span = math.log(high / low)
    return "".join(_BARS[round(math.log(v / low) / span * (len(_BARS) - 1))] for v in values)


def shorten(name: str, width: int = NAME_WIDTH) -> str:
    """``name`` cut to ``width`` characters in the middle (``…``), so that fused tasks that differ only in their
    last operators can still be told apart."""
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return name[:head] + "…" + name[len(name) - (width - 1 - head):]


def time_left(snapshot, budget) -> float | None:
    """Estimated seconds of tuning left under ``budget``: the time budget left, or the trials left at the
    run's pace so far, whichever ends first; ``None`` when nothing bounds it yet (no time budget and no
    trial measured)."""
    left = []
    if budget.time_budget is not None:
        left.append(max(0.0, budget.time_budget - snapshot.elapsed))
    trials = []
    if budget.max_trials is not None:
        trials.append(max(0, budget.max_trials - snapshot.trials))
    if budget.per_task_trials is not None:
        trials.append(sum(max(0, budget.per_task_trials - t.trials) for t in snapshot.live))
    if trials and snapshot.trials > 0:
        left.append(min(trials) * snapshot.elapsed / snapshot.trials)
    return min(left) if left else None


def forecast_text(forecast) -> str:
    """`` | ~9.8 ms at budget end (80 %: 9.1-10.9); goal 8 ms in ~4m10s (80 %: 2m30s-never)``, or nothing
    while the forecast is not calibrated (:attr:`~tunewise.forecast.Forecast.calibrated`)."""
    if forecast is None or not forecast.calibrated:
        return ""
    return f" | {forecast.line(clock=_duration)}"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class LiveProgress(Callback):
    """Draws the run on a terminal (off a terminal, prints the phase lines and one line per slot); the
    ``"progress"`` callback (:mod:`tunewise.callbacks`)."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self._live: Live | None = None
        self._start = time.perf_counter()
        self._budget = None
        self._snapshot = None  # the latest, taken at self._at (perf_counter)
        self._at = 0.0
        self._in_flight = None  # (task index, phase, perf_counter when the phase began)
        self._energy = ""  # the run's energy after the latest slot, as shown

    def phase(self, text: str) -> None:
        self.console.print(f"[bold]tunewise[/bold] {time.perf_counter() - self._start:6.1f}s  {text}", soft_wrap=True)

    def tuning_started(self, model, budget) -> None:
        self._budget = budget
        self.phase(f"tuning {len(model.tasks)} tasks; " + (f"untuned estimate {ms(model.untuned_latency())} ms"
                   if model.defaults_measured else "the heaviest by FLOPs first, then every task's default latency"))
        if self.console.is_terminal:
            self._live = Live(console=self.console, get_renderable=self._render, refresh_per_second=2,
                              transient=False)
            self._live.start()

    def _header(self, snapshot) -> str:
        b = self._budget
        trials = f"{snapshot.trials}" + (f"/{b.max_trials}" if b.max_trials else "")
        untuned, now = snapshot.untuned_latency(), snapshot.estimated_latency()
        speedup = f" ({untuned / now:.1f}x)" if now > 0 and math.isfinite(untuned) else ""
        in_model = snapshot.calibrated_latency()
        checked = f", {ms(in_model)} ms in the model as last checked" if in_model != now else ""
        left = time_left(snapshot, b)
        eta = f" | ~{_duration(left)} left" if left is not None else ""
        trend = sparkline([latency for _, latency in snapshot.history], top=untuned)
        return (f"elapsed {_duration(snapshot.elapsed)}{self._energy} | trials {trials} | model latency estimate "
                f"{ms(now)} ms{speedup} {trend}{checked}{eta}{forecast_text(snapshot.forecast)}")

    def _table(self, snapshot) -> Table:
        table = Table(expand=False, pad_edge=False)
        for column in ("task", "weight", "default ms", "best ms", "GFLOPS", "trials", "failed", ""):
            table.add_column(column, justify="left" if column == "task" else "right", no_wrap=True)
        for t in snapshot.tasks:
            table.add_row(shorten(t.name), str(t.weight), ms(t.default_latency), ms(t.best), f"{t.gflops:.1f}",
                          str(t.trials), str(t.failures), "done" if t.finished else "")
        return table

    def _render(self):
        """The display now: the latest snapshot, its clock brought up to date (the run goes on between slots)."""
        if self._snapshot is None:
            return Text("")
        now = time.perf_counter()
        snapshot = dataclasses.replace(self._snapshot, elapsed=self._snapshot.elapsed + now - self._at)
        lines = [Text(self._header(snapshot))]
        if self._in_flight is not None:
            task, phase, since = self._in_flight
            lines.append(Text(f"slot {snapshot.slot} in flight: {shorten(snapshot.tasks[task].name)} | {phase} "
                              f"{_duration(now - since)}"))
        return Group(*lines, self._table(snapshot))

    def slot_phase(self, snapshot, task: int, phase: str) -> None:
        if self._snapshot is None:
            self._snapshot, self._at = snapshot, time.perf_counter()
        self._in_flight = (task, phase, time.perf_counter())

    def slot_recorded(self, event, snapshot) -> None:
        self._snapshot, self._at = snapshot, time.perf_counter()
        if event.run_joules is not None:
            self._energy = f", {event.run_joules / 1e3:.1f} kJ" + (" (est.)" if event.joules_estimated else "")
        self._in_flight = None
        if self._live is None:
            task = snapshot.tasks[event.task]
            skipped = f" ({event.skipped} skipped)" if event.skipped else ""
            self.console.print(f"  slot {event.slot:4d} {shorten(task.name):{NAME_WIDTH}s} +{event.trials:3d} trials"
                               f"{skipped} best {ms(task.best)} ms | {self._header(snapshot)}", soft_wrap=True,
                               markup=False, highlight=False)

    def model_measured(self, point, snapshot) -> None:
        self._snapshot, self._at = snapshot, time.perf_counter()
        result = (f"{ms(point.latency)} ms" if math.isfinite(point.latency) else f"failed ({point.message})")
        if point.in_slow_stretch:
            result += (f", from the previous check's model timed beside it: {ms(point.timed)} ms itself, "
                       "in a slow stretch of the machine")
        self.phase(f"model latency measured at {_duration(point.elapsed)} of tuning: {result} "
                   f"(the check took {point.seconds:.0f}s)")

    def tuning_finished(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
