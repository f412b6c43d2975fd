"""Energy estimated from CPU time, where no counter can be read."""

from __future__ import annotations

import contextlib

import psutil

from tunewise._numbers import is_positive
from tunewise.energy._base import EnergyMeter, Reading

WATTS_PER_CORE = 10.0
"""A busy core's power when nothing measures it: a server CPU's rated power (TDP) over its cores, about
7.8 W for the 16-core, 125 W Xeon Gold 5218 and 16 W for the 6-core, 95 W Core i7-8700K of the Trimmer
paper's platforms."""


class CpuTimeEstimate(EnergyMeter):
    """Estimates energy as the CPU seconds the process tree used since the meter was made times
    ``watts_per_core``. The tree is this process (or ``pid``) and its descendants: the CPU time of those
    still running and of those that ended and were waited for (``psutil``'s ``children_user`` and
    ``children_system``). A descendant that ends without being waited for takes its time with it; readings
    never go down. Idle power, memory and accelerators are left out. Readings are labelled estimated.

    Always available.
    """

    name = "estimate"

    def __init__(self, *, watts_per_core: float = WATTS_PER_CORE, pid: int | None = None):
        if not is_positive(watts_per_core):
            raise ValueError(f"watts_per_core must be a positive number, got {watts_per_core!r}")
        self.watts_per_core = watts_per_core
        self.pid = pid
        self._process = psutil.Process(pid)
        self._start = self.cpu_seconds()
        self._joules = 0.0

    def cpu_seconds(self) -> float:
        """CPU seconds the process tree has used (user and system), ended and waited-for descendants
        included."""
        total = _seconds(self._process.cpu_times())
        for child in self._process.children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                total += _seconds(child.cpu_times())
        return total

    def read(self) -> Reading:
        self._joules = max(self._joules, (self.cpu_seconds() - self._start) * self.watts_per_core)
        return Reading(self._joules, estimated=True)


def _seconds(times) -> float:
    return times.user + times.system + times.children_user + times.children_system
