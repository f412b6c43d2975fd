"""The live progress display of ``tunewise tune`` (rich): per-task table, model latency, trials, time."""

from __future__ import annotations

import math
import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from tunewise.workflow import Reporter


def _ms(seconds: float) -> str:
    return "-" if not math.isfinite(seconds) else f"{seconds * 1e3:.3f}"


class LiveProgress(Reporter):
    """Draws the run on a terminal (or prints phase lines only when ``console`` is not a terminal)."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self._live: Live | None = None
        self._start = time.perf_counter()
        self._model = None
        self._budget = None

    def phase(self, text: str) -> None:
        self.console.print(f"[bold]tunewise[/bold] {time.perf_counter() - self._start:6.1f}s  {text}")

    def tuning_started(self, model, budget) -> None:
        self._model, self._budget = model, budget
        self.phase(f"tuning {len(model.tasks)} tasks; untuned estimate {_ms(model.untuned_latency())} ms")
        if self.console.is_terminal:
            self._live = Live(console=self.console, refresh_per_second=4, transient=False)
            self._live.start()

    def _header(self, snapshot) -> str:
        b = self._budget
        trials = f"{snapshot.trials}" + (f"/{b.max_trials}" if b.max_trials else "")
        left = f", {max(0.0, b.time_budget - snapshot.elapsed):.0f}s left" if b.time_budget else ""
        untuned, now = self._model.untuned_latency(), snapshot.estimated_latency()
        speedup = f" ({untuned / now:.1f}x)" if now > 0 and math.isfinite(untuned) else ""
        return (f"elapsed {snapshot.elapsed:.0f}s{left} | trials {trials} | "
                f"model latency estimate {_ms(now)} ms{speedup}")

    def _table(self, snapshot) -> Table:
        table = Table(expand=False, pad_edge=False)
        for column in ("task", "weight", "default ms", "best ms", "GFLOPS", "trials", "failed", ""):
            table.add_column(column, justify="left" if column == "task" else "right")
        for t in snapshot.tasks:
            table.add_row(t.name[:40], str(t.weight), _ms(t.default_latency), _ms(t.best), f"{t.gflops:.1f}",
                          str(t.trials), str(t.failures), "done" if t.finished else "")
        return table

    def slot(self, event, snapshot) -> None:
        if self._live is not None:
            self._live.update(Group(Text(self._header(snapshot)), self._table(snapshot)))
        else:
            task = snapshot.tasks[event.task]
            self.console.print(f"  slot {event.slot:4d} {task.name[:36]:36s} +{event.trials:3d} trials "
                               f"best {_ms(task.best)} ms | {self._header(snapshot)}")

    def tuning_finished(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
