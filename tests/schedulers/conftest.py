"""Shared fixtures of the scheduler tests."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tunewise.lab.replay import TaskRun, Trace, TraceTask
from tunewise.lab.synthetic import synthetic


@pytest.fixture
def trace_with_layout_tasks() -> Trace:
    """A one-seed synthetic trace of four tasks that tuning speeds up (indices 0-3) and six layout operators
    that it does not (4-9), each 2 us whatever the schedule."""
    base = synthetic(n_tasks=4, trials=96, seeds=1, seed=3)
    layout = tuple(TraceTask(f"reshape{i}", 1, 0.0, 2e-6) for i in range(6))
    flat = TaskRun((2e-6,) * 16, (0.5,) * 16)
    return replace(base, tasks=base.tasks + layout, runs=(base.runs[0] + (flat,) * 6,))
