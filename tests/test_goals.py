"""Latency goals: absolute, or a multiple of a reference timed at the start of the run."""

import pytest

from tunewise.errors import InputError
from tunewise.goals import Goal


@pytest.mark.parametrize("text,seconds", [("12ms", 0.012), ("0.5s", 0.5), ("800us", 8e-4), (" 3 ms ", 0.003)])
def test_an_absolute_goal_is_its_latency(text, seconds):
    goal = Goal.parse(text)
    assert not goal.relative and goal.resolve() == pytest.approx(seconds)
    assert goal.resolve(eager=1.0, onnxruntime=1.0) == pytest.approx(seconds)  # references do not matter


def test_a_relative_goal_is_a_multiple_of_its_reference():
    assert Goal.parse("0.9x-ort").resolve(eager=0.020, onnxruntime=0.010) == pytest.approx(0.009)
    assert Goal.parse("1.5x-eager").resolve(eager=0.020, onnxruntime=0.010) == pytest.approx(0.030)
    with pytest.raises(InputError, match="needs the model's onnxruntime latency"):
        Goal.parse("0.9x-ort").resolve(eager=0.020, onnxruntime=None)


@pytest.mark.parametrize("text", ["", "12", "-1ms", "0ms", "fast", "0x-ort", "0.9x-tvm", "12 parsecs", "1e999s"])
def test_anything_else_is_a_one_line_error(text):
    with pytest.raises(InputError, match="bad latency goal") as caught:
        Goal.parse(text)
    assert "\n" not in str(caught.value)
