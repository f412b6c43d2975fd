"""The model-latency estimate, and the estimate brought to the compiled model by whole-model checks."""

import math

import pytest

from tunewise.tuning.estimate import calibrated_latency, model_latency
from tunewise.tuning.state import Snapshot, TaskView

CURVE = ((0.0, 10.0), (30.0, 6.0), (60.0, 5.0), (90.0, 4.0))  # (tuning seconds, estimate)


def test_the_estimate_is_each_tasks_best_or_default_weighted():
    assert model_latency([(2, 1.0, 0.5), (1, 3.0, math.inf), (1, 2.0, 2.5)]) == 2 * 0.5 + 3.0 + 2.0


def test_without_a_check_the_estimate_stands():
    assert calibrated_latency(4.0, CURVE, []) == 4.0
    assert calibrated_latency(4.0, CURVE, [(70.0, math.inf)]) == 4.0  # a failed check measured nothing
    assert calibrated_latency(4.0, (), [(70.0, 7.0)]) == 4.0  # no estimate to compare the check with


def test_the_latest_check_adds_the_gap_it_measured():
    # at 70 s the estimate was 5 (the slot that ended at 60 s), the model ran 7: 2 more than estimated
    assert calibrated_latency(4.0, CURVE, [(70.0, 7.0)]) == pytest.approx(6.0)
    # the latest check that measured counts: a later failure is passed over, an earlier check is replaced
    assert calibrated_latency(4.0, CURVE, [(35.0, 9.0), (70.0, 7.0), (95.0, math.inf)]) == pytest.approx(6.0)
    assert calibrated_latency(4.0, CURVE, [(30.0, 9.0)]) == pytest.approx(7.0)  # right after the slot at 30 s


def test_a_check_faster_than_the_estimate_adds_nothing():
    assert calibrated_latency(4.0, CURVE, [(70.0, 4.5)]) == 4.0


def test_a_snapshot_brings_its_estimate_to_the_model_it_checked():
    task = TaskView(0, "t", 2, 1e6, 3e-3, (1e-3,), (16,), 16)
    plain = Snapshot((task,), 50.0, history=((0.0, 6e-3), (40.0, 2e-3)))
    assert plain.calibrated_latency() == plain.estimated_latency() == pytest.approx(2e-3)
    checked = Snapshot((task,), 50.0, history=plain.history, measured=((45.0, 2.5e-3),))
    assert checked.calibrated_latency() == pytest.approx(2.5e-3)
