"""The evaluators for real, in MetaSchedule's runner worker through the Measurer (the Session: test_adatune)."""

from __future__ import annotations

import math
import statistics

import pytest

from tunewise import evaluators
from tunewise.lowering import tasks

pytestmark = pytest.mark.tvm

ADAPTIVE = {"runs": 20, "batch_ms": 5.0, "max_batches": 6}


@pytest.fixture
def adaptive(measurer):
    """The shared measurer, timing with the adaptive evaluator for the duration of one test."""
    fixed = measurer.evaluator
    measurer.evaluator = evaluators.create("adaptive", **ADAPTIVE)
    yield measurer
    measurer.evaluator = fixed


def matmul(n: int):
    import tvm
    from tvm import te

    a, b = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b, c])})
    return mod, tasks.args_info(mod)


def test_the_default_measurer_uses_the_adaptive_evaluator(host_target):
    from tunewise.tuning import measure

    m = measure.Measurer(host_target)
    try:
        assert m.evaluator == evaluators.Adaptive()
    finally:
        m.close()


def test_adaptive_measurement_of_a_tiny_operator(adaptive):
    small, large = matmul(16), matmul(96)  # ~1 us and ~1 ms here
    fast, slow = adaptive.measure([small, large])  # no reference: never stopped as slow
    for m in (fast, slow):
        assert m.error is None and 3 <= len(m.run_secs) <= 6  # measured until stable, or 6 micro-batches
        assert 0 < m.latency < 1 and m.run_seconds > 0
    assert slow.latency > 5 * fast.latency


def test_a_candidate_far_slower_than_the_best_stops_after_one_micro_batch(adaptive):
    small, large = matmul(16), matmul(96)
    assert [len(m.run_secs) for m in adaptive.measure([large], reference=1e-7)] == [1]
    # within one task's batch the best so far is the reference: the large one follows the small one
    fast, slow = adaptive.measure([small, large], reference=math.inf)
    assert len(fast.run_secs) >= 3 and len(slow.run_secs) == 1
    assert slow.error is None and slow.latency > 5 * fast.latency


def scale(n: int):
    """``y = a * s[0]`` over ``n`` floats: arguments ``s, a, y``, so a cache flush of all but the first
    flushes the two large ones."""
    import tvm
    from tvm import te

    s, a = te.placeholder((1,), name="s"), te.placeholder((n,), name="a")
    y = te.compute((n,), lambda i: a[i] * s[0], name="y")
    mod = tvm.IRModule({"main": te.create_prim_func([s, a, y])})
    return mod, tasks.args_info(mod)


@pytest.mark.timing  # a warm run's cache is another test's too while the tests run side by side
def test_cold_measurement_reads_the_large_arguments_from_memory(host_target, adaptive):
    from tunewise.tuning import measure

    streaming = scale(1 << 20)  # 4 MB in and 4 MB out: in the last-level cache when warm, not when cold
    cold = measure.Measurer(host_target, measure.MeasureConfig(enable_cpu_cache_flush=True),
                            evaluator=adaptive.evaluator)
    ratios = []  # cold over warm, measured in turn: the host's pace changes from one second to the next
    try:
        for _ in range(3):
            [flushed] = cold.measure([streaming])
            [warm] = adaptive.measure([streaming])
            assert flushed.error is None and warm.error is None
            ratios.append(flushed.latency / warm.latency)
    finally:
        cold.close()
    assert statistics.median(ratios) > 1.3
