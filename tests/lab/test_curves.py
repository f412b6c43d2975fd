import math

import pytest

from tunewise.lab.curves import final, ratio, reached, time_to_quality


def test_the_goal_is_the_best_final_latency_of_any_curve_with_its_margin():
    slow = [(0.0, 10.0), (60.0, 5.0), (120.0, 4.2), (180.0, 4.0)]
    fast = [(0.0, 10.0), (30.0, 4.1), (90.0, 4.15), (180.0, 4.3)]  # its last point is worse than its best
    goal, times = time_to_quality({"stock": slow, "ours": fast}, within=0.05)
    assert goal == pytest.approx(4.2)  # from slow's final 4.0, not fast's best 4.1 along the way
    assert times == {"stock": 120.0, "ours": 30.0}
    assert ratio(times["stock"], times["ours"]) == pytest.approx(4.0)


def test_a_curve_that_never_gets_within_the_margin_has_no_time():
    goal, times = time_to_quality({"a": [(0.0, 9.0), (10.0, 2.0)], "b": [(0.0, 9.0), (10.0, 3.0)]}, within=0.10)
    assert goal == pytest.approx(2.2)
    assert times == {"a": 10.0, "b": None}
    assert ratio(times["b"], times["a"]) is None and ratio(times["a"], times["b"]) is None


def test_failed_points_are_neither_final_nor_reached():
    curve = [(0.0, 8.0), (5.0, math.inf), (9.0, 6.0), (12.0, math.inf)]
    assert final(curve) == 6.0
    assert reached(curve, 7.0) == 9.0
    assert final([(0.0, math.inf)]) == math.inf
    with pytest.raises(ValueError, match="finite"):
        time_to_quality({"a": [(0.0, math.inf)]})
    with pytest.raises(ValueError, match="margin"):
        time_to_quality({"a": curve}, within=-0.1)
