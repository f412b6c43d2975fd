"""Task extraction and default latencies on a real tiny model."""

import math

import pytest

from tunewise.importing import frontend
from tunewise.lowering import tasks

pytestmark = pytest.mark.tvm


def test_default_latencies_are_measured_in_one_quick_batch(host_target, measurer):
    model = tasks.extract(frontend.load("tiny-cnn"), host_target)
    assert all(t.default_latency == math.inf for t in model.tasks)  # not measured without a measurer
    quick = tasks.measure_defaults(model, measurer)
    # every task gets a finite default latency, so the untuned estimate (and the summary) is defined
    assert all(0 < t.default_latency < math.inf for t in quick.tasks)
    assert 0 < quick.untuned_latency() < math.inf
    assert [t.name for t in quick.tasks] == [t.name for t in model.tasks]
    # one timed run each means what the configured measurement means: the same latency, within noise, for
    # the tasks long enough to time in one run (the sub-microsecond ones are at the timer's resolution). One
    # timed run of a few microseconds can take several times as long when the process is preempted in it, so
    # their sum is compared, where the longest tasks weigh most: a unit or a meaning that differs moves all
    full = measurer.measure([(m, tasks.args_info(m)) for m in model.task_mods])
    timed = [(task.default_latency, measured.latency)
             for task, measured in zip(quick.tasks, full, strict=True) if measured.latency > 1e-6]
    assert len(timed) >= 2
    assert sum(q for q, _ in timed) == pytest.approx(sum(f for _, f in timed), rel=1.0)
