"""The steps after tuning: the fastest model a check measured is timed beside the final one, and the faster
is the artifact."""

import json

import pytest


@pytest.mark.tvm
def test_the_fastest_checked_model_is_timed_beside_the_final_one_and_the_faster_saved(tiny_mlp, tmp_path):
    from tvm.s_tir.meta_schedule.database import MemoryDatabase

    from tunewise import compile as compiler
    from tunewise.checks import Checked
    from tunewise.finish import finish

    compiled, max_error = compiler.compile_checked(tiny_mlp, MemoryDatabase())
    done = finish(tiny_mlp, MemoryDatabase(), str(tmp_path / "out"), compare_torch=False, timing_rounds=3,
                  checked=Checked(1.0, compiled, max_error, trials=6))
    with open(tmp_path / "out" / compiler.METADATA) as f:
        saved = json.load(f)
    final, checked = saved["final_records_latency_s"], saved["checked_records_latency_s"]
    assert 0 < final < 0.01 and 0 < checked < 0.01  # timed side by side, not the check's own 1 s
    assert saved["latency_s"] == done.tuned_latency == min(final, checked)
    assert saved["records"] == ("trial 6" if checked < final else "final")
    plain = finish(tiny_mlp, MemoryDatabase(), str(tmp_path / "plain"), compare_torch=False, timing_rounds=3)
    assert plain.metadata["records"] == "final" and "checked_records_latency_s" not in plain.metadata
    assert plain.since_check is None and done.since_check == {"trials": 6, "read_s": 1.0, "timed_s": checked}


@pytest.mark.tvm
def test_the_model_a_check_compiled_from_the_final_records_is_not_compiled_again(tiny_mlp, tmp_path):
    from tvm.s_tir.meta_schedule.database import MemoryDatabase

    from tunewise import compile as compiler
    from tunewise.checks import Checked
    from tunewise.finish import finish

    compiled, max_error = compiler.compile_checked(tiny_mlp, MemoryDatabase())
    phases = []
    done = finish(tiny_mlp, MemoryDatabase(), str(tmp_path / "out"), compare_torch=False, timing_rounds=3,
                  on_phase=phases.append, built=Checked(1.0, compiled, max_error, trials=6))
    assert not any(phase.startswith("compiling") for phase in phases) and phases  # timed, not compiled
    assert done.metadata["records"] == "final" and 0 < done.tuned_latency < 0.01  # timed, not the check's 1 s
    # how fast the machine runs now against the check: the check's model timed here over what it read then
    assert done.since_check == done.metadata["since_check"] == {"trials": 6, "read_s": 1.0,
                                                                "timed_s": done.tuned_latency}
    saved = compiler.load(str(tmp_path / "out"))
    assert compiler.verify(saved, tiny_mlp.inputs, tiny_mlp.reference_outputs) < 1e-4
