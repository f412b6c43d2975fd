"""The steps after tuning: the fastest model a check measured is timed beside the final one, and the faster
is the artifact."""

import json

import pytest


@pytest.mark.tvm
def test_the_fastest_checked_model_is_timed_beside_the_final_one_and_the_faster_saved(tiny_mlp, tmp_path):
    from tvm.s_tir.meta_schedule.database import MemoryDatabase

    from tunewise.delivery import compile as compiler
    from tunewise.delivery.finish import FinishRequest, finish
    from tunewise.tuning.model_checks import Checked

    compiled, max_error = compiler.compile_checked(tiny_mlp, MemoryDatabase())
    done = finish(tiny_mlp, MemoryDatabase(), str(tmp_path / "out"), FinishRequest(
        references=False, timing_rounds=3, checked=Checked(1.0, compiled, max_error, trials=6)))
    with open(tmp_path / "out" / compiler.METADATA) as f:
        saved = json.load(f)
    final, checked = saved["final_records_latency_s"], saved["checked_records_latency_s"]
    assert 0 < final < 0.01 and 0 < checked < 0.01  # timed side by side, not the check's own 1 s
    assert saved["latency_s"] == done.tuned_latency == min(final, checked)
    assert saved["records"] == ("trial 6" if checked < final else "final")
    plain = finish(tiny_mlp, MemoryDatabase(), str(tmp_path / "plain"), FinishRequest(references=False,
                                                                                      timing_rounds=3))
    assert plain.metadata["records"] == "final" and "checked_records_latency_s" not in plain.metadata
    assert plain.since_check is None and done.since_check == {"trials": 6, "read_s": 1.0, "timed_s": checked,
                                                             "timings": 1}


@pytest.mark.tvm
def test_the_model_a_check_compiled_from_the_final_records_is_not_compiled_again(tiny_mlp, tmp_path):
    from tvm.s_tir.meta_schedule.database import MemoryDatabase

    from tunewise.delivery import compile as compiler
    from tunewise.delivery.finish import FinishRequest, finish
    from tunewise.tuning.model_checks import Checked

    compiled, max_error = compiler.compile_checked(tiny_mlp, MemoryDatabase())
    phases = []
    done = finish(tiny_mlp, MemoryDatabase(), str(tmp_path / "out"), FinishRequest(
        references=False, timing_rounds=3, built=Checked(1.0, compiled, max_error, trials=6)), on_phase=phases.append)
    assert not any(phase.startswith("compiling") for phase in phases) and phases  # timed, not compiled
    assert done.metadata["records"] == "final" and 0 < done.tuned_latency < 0.01  # timed, not the check's 1 s
    # how fast the machine runs now against the check: the check's model timed here over what it read then
    assert done.since_check == done.metadata["since_check"] == {"trials": 6, "read_s": 1.0,
                                                                "timed_s": done.tuned_latency, "timings": 1}
    saved = compiler.load(str(tmp_path / "out"))
    assert compiler.verify(saved, tiny_mlp.inputs, tiny_mlp.reference_outputs) < 1e-4


def _timing(*latencies):
    from tunewise.delivery.timing import SideBySide

    return SideBySide(list(latencies), 10)


class _Clock:
    """A clock that a timing moves on by ``took`` seconds, and a sleep by the seconds it sleeps."""

    def __init__(self, took: float):
        self.now, self.took, self.starts = 0.0, took, []

    def __call__(self) -> float:
        return self.now

    def timing(self, side):
        self.starts.append(self.now)
        self.now += self.took
        return side

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_timing_in_a_slow_stretch_is_made_again_and_the_steadiest_kept():
    from tunewise.delivery.finish import RETIMES, steadiest

    # the model a check read at 10 ms is the second: 14 ms (a slow stretch), then 10.2 ms (as fast as it was)
    timings = iter([_timing(12e-3, 14e-3), _timing(9e-3, 10.2e-3), _timing(1.0, 1.0)])
    told = []
    side, count = steadiest(lambda: next(timings), 1, 10e-3, on_retime=told.append, sleep=lambda seconds: None)
    assert (side.latencies, count) == ([9e-3, 10.2e-3], 2) and told == [pytest.approx(1.4)]
    # slow every time: RETIMES more timings, and the one nearest the reading kept
    slow = iter([_timing(1.0, 15e-3), _timing(2.0, 13e-3), _timing(3.0, 14e-3), _timing(4.0, 12.5e-3)])
    side, count = steadiest(lambda: next(slow), 1, 10e-3, sleep=lambda seconds: None)
    assert count == RETIMES + 1 and side.latencies == [2.0, 13e-3]
    # no model a check read, or one as fast as its reading: one timing
    assert steadiest(lambda: _timing(5e-3), None, None)[1] == 1
    assert steadiest(lambda: _timing(10.9e-3), 0, 10e-3)[1] == 1


def test_timings_again_are_spaced_and_must_end_by_the_time_budget():
    from tunewise.delivery.finish import RETIME_SPACING, RETIMES, steadiest

    clock = _Clock(took=5.0)  # a short timing: the next starts RETIME_SPACING after it began
    assert steadiest(lambda: clock.timing(_timing(14e-3)), 0, 10e-3, clock=clock, sleep=clock.sleep)[1] == RETIMES + 1
    assert clock.starts == [i * RETIME_SPACING for i in range(RETIMES + 1)]
    clock = _Clock(took=30.0)  # a long one: the next starts at once
    steadiest(lambda: clock.timing(_timing(14e-3)), 0, 10e-3, clock=clock, sleep=clock.sleep)
    assert clock.starts == [0.0, 30.0, 60.0]
    clock = _Clock(took=30.0)  # the second would end at 60 s
    side, count = steadiest(lambda: clock.timing(_timing(14e-3)), 0, 10e-3, finish_by=50.0, clock=clock,
                            sleep=clock.sleep)
    assert count == 1 and side.latencies == [14e-3]
    clock = _Clock(took=5.0)  # the second would start at RETIME_SPACING and end 5 s later
    assert steadiest(lambda: clock.timing(_timing(14e-3)), 0, 10e-3, finish_by=RETIME_SPACING + 4.0, clock=clock,
                     sleep=clock.sleep)[1] == 1
    clock = _Clock(took=5.0)
    assert steadiest(lambda: clock.timing(_timing(14e-3)), 0, 10e-3, finish_by=RETIME_SPACING + 5.0, clock=clock,
                     sleep=clock.sleep)[1] == 2
