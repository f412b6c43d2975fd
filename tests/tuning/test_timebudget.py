"""Fitting a command into its time budget: the slot rule on synthetic slot durations, the compile estimate."""

import math
import re
import subprocess
import sys
import time

import pytest

from tunewise import stores
from tunewise.tuning.timebudget import (
    FIRST_SLOT_SECONDS,
    REFERENCES_PROCESS_SECONDS,
    TIMING_PROCESS_SECONDS,
    SlotPace,
    compile_estimate,
    short_budget_note,
)


def pace(*slots: tuple[bool, float, int, float]) -> SlotPace:
    """A pace that saw ``(searching, fixed seconds, trials, measure seconds)`` slots."""
    p = SlotPace()
    for searching, fixed, trials, measure in slots:
        p.record(searching=searching, fixed=fixed, trials=trials, measure_seconds=measure)
    return p


def test_a_runs_first_slot_of_either_kind_needs_the_search_prior():
    for searching in (False, True):
        assert SlotPace(search_prior=15.0).trials_that_fit(14.0, 16, searching=searching) == 0
        assert SlotPace(search_prior=15.0).trials_that_fit(15.0, 16, searching=searching) == 16
    assert SlotPace().trials_that_fit(0.0, 16, searching=False) == 0


def test_a_budget_that_left_no_time_to_tune_is_named_with_its_parts():
    assert short_budget_note(90, 7.4, imported=7, extracted=21, kept=48, measured=2) is None  # it tuned
    assert short_budget_note(90, FIRST_SLOT_SECONDS, imported=7, extracted=21, kept=48, measured=0) is None
    note = short_budget_note(90, 7.4, imported=7, extracted=21, kept=48, measured=0)
    assert note == ("the 90 s time budget left 7 s to tune (importing took 7 s and extracting 21 s, and compiling "
                    "and timing the result needs about 48 s): too little for a first slot, so nothing was tuned; "
                    "a budget of 3m or more tunes")  # 7 + 21 + 48 and four first slots
    assert "left 0 s to tune" in short_budget_note(60, -20, imported=7, extracted=21, kept=48, measured=0)


@pytest.mark.tvm
def test_tune_says_when_its_budget_left_no_time_to_tune(tmp_path):
    import logging

    import tunewise
    from tunewise.tuning.session import Budget

    class Notes(logging.Handler):
        def __init__(self):
            super().__init__(logging.WARNING)
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    notes, logger = Notes(), logging.getLogger("tunewise.job.workflow")
    logger.addHandler(notes)
    try:
        result = tunewise.tune("tiny-mlp", budget=Budget(time_budget=4.0), compare_torch=False, timing_rounds=3,
                               progress=False, store=f"sqlite:///{tmp_path}/tunewise.db", output=str(tmp_path / "out"))
    finally:
        logger.removeHandler(notes)
    [note] = notes.lines
    assert note.startswith("the 4 s time budget left 0 s to tune (importing took ") and "nothing was tuned" in note
    assert result.trials == 0 and result.tuned_latency > 0  # the model is still compiled, untuned


def test_an_unseen_search_is_taken_at_its_prior():
    assert SlotPace(search_prior=15.0).trials_that_fit(14.0, 16, searching=True) == 0
    assert SlotPace(search_prior=15.0).trials_that_fit(16.0, 16, searching=True) == 16
    assert pace((False, 1.0, 16, 8.0)).trials_that_fit(19.0, 16, searching=True) == 8  # 15 s + 0.5 s a trial


def test_a_slot_that_fits_keeps_its_trials():
    p = pace((False, 1.0, 16, 8.0), (False, 2.0, 16, 8.0))  # 2 s fixed at most, 0.5 s a trial
    assert p.predict(16, searching=False) == pytest.approx(10.0)
    assert p.trials_that_fit(10.0, 16, searching=False) == 16


def test_a_slot_that_does_not_fit_shrinks_to_the_trials_that_do():
    p = pace((False, 2.0, 16, 8.0))
    assert p.trials_that_fit(9.9, 16, searching=False) == 15
    assert p.trials_that_fit(6.0, 16, searching=False) == 8
    assert p.trials_that_fit(2.4, 16, searching=False) == 0  # not one trial: stop


def test_searching_slots_are_predicted_from_searching_slots():
    # the evolutionary search costs 10 s against 1 s for a slot that takes queued candidates
    p = pace((True, 10.0, 16, 8.0), (False, 1.0, 16, 8.0))
    assert p.trials_that_fit(12.0, 16, searching=False) == 16
    assert p.trials_that_fit(12.0, 16, searching=True) == 4
    # before any slot without a search, they are predicted as searching ones
    assert pace((True, 1.0, 16, 8.0)).trials_that_fit(5.0, 16, searching=False) == 8


def test_only_the_recent_slots_count():
    p = pace((False, 30.0, 16, 160.0), *[(False, 1.0, 16, 8.0)] * 8)  # one slow slot, 8 quick ones since
    assert p.predict(16, searching=False) == pytest.approx(9.0)


def test_empty_slots_do_not_divide_by_zero():
    p = pace((False, 1.0, 0, 0.0))
    assert p.predict(16, searching=False) == pytest.approx(1.0)
    assert p.trials_that_fit(0.5, 16, searching=False) == 0


def test_compile_estimate():
    # the tuned model alone: a build and two exports (for timing, the artifact) of half a build each; the model
    # run twice; the timing process: a warm-up and 10 rounds of at least 0.2 s each; the references process
    assert compile_estimate(3.0, None, 0.01, references=False) == pytest.approx(
        6.0 + 0.02 + TIMING_PROCESS_SECONDS + (0.01 + 10 * 0.2))
    assert compile_estimate(3.0, None, 0.01) == pytest.approx(compile_estimate(3.0, None, 0.01, references=False)
                                                              + REFERENCES_PROCESS_SECONDS + 2 * (0.01 + 10 * 0.2))
    # with the untuned model: two builds and three exports (untuned, tuned, the artifact); the timing process
    # times both, each a warm-up and 10 rounds of at least 0.2 s each (or one call when longer)
    timed = TIMING_PROCESS_SECONDS + (0.5 + 10 * 0.5) + (0.01 + 10 * 0.2)
    references = REFERENCES_PROCESS_SECONDS + 2 * (0.01 + 10 * 0.2)
    assert compile_estimate(3.0, 0.5, 0.01) == pytest.approx(10.5 + 0.02 + timed + references)
    assert compile_estimate(3.0, 0.5, 0.01, references=False) == pytest.approx(10.5 + 0.02 + timed)
    assert compile_estimate(1.0, math.inf, math.inf) == pytest.approx(
        3.5 + TIMING_PROCESS_SECONDS + 4.0 + REFERENCES_PROCESS_SECONDS + 4.0)
    # an untuned model of 6 s a call: the compiled models get 3 rounds (timing.rounds_for), not 10
    slow = TIMING_PROCESS_SECONDS + (6.0 + 3 * 6.0) + (0.01 + 3 * 0.2)
    assert compile_estimate(3.0, 6.0, 0.01, references=False) == pytest.approx(10.5 + 0.02 + slow)
    # a tuned model still seconds a call: the references are counted at a round's 0.1 s a call at most
    assert compile_estimate(3.0, 6.0, 5.0) == pytest.approx(compile_estimate(3.0, 6.0, 5.0, references=False)
                                                            + REFERENCES_PROCESS_SECONDS + 2 * (0.1 + 10 * 0.2))
    # a check measured a model while tuning: its export, and its timing beside the tuned one
    assert compile_estimate(3.0, 0.5, 0.01, references=False, checked=True) == pytest.approx(
        10.5 + 0.02 + timed + 1.5 + (0.01 + 10 * 0.2))


@pytest.mark.timing
@pytest.mark.tvm
def test_compile_estimate_covers_what_follows_tuning(tmp_path, tiny_mlp):
    """The steps after tuning, as ``tune`` runs them on tiny-mlp (by default, the untuned model not timed), take
    no longer than estimated."""
    from tunewise.delivery import compile as compiler
    from tunewise.delivery import timing

    start = time.perf_counter()
    tuned = compiler.CompiledModel(compiler.build(tiny_mlp), tiny_mlp.target)
    build_seconds = time.perf_counter() - start
    compiler.verify(tuned, tiny_mlp.inputs, tiny_mlp.reference_outputs)
    [tuned_latency], _ = timing.time_models([tuned], tiny_mlp.inputs)
    timing.time_references("tiny-mlp", tiny_mlp.inputs)
    tuned.save(str(tmp_path / "artifact"))
    took = time.perf_counter() - start
    assert took <= compile_estimate(build_seconds, None, tuned_latency)


@pytest.mark.timing
@pytest.mark.tvm
def test_a_time_budget_covers_the_whole_tune_command(tmp_path):
    budget, url = 50, f"sqlite:///{tmp_path}/tunewise.db"
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "tunewise.cli", "tune", "tiny-cnn", "--time-budget", f"{budget}s",
                           "--store", url, "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    wall = time.time() - start
    assert proc.returncode == 0, proc.stderr
    assert "time budget left" not in proc.stderr  # time to tune
    assert wall < budget + 10  # the interpreter's start and a misjudged compile time
    split = dict(re.findall(r"(import|extract|tune|compile) (\d+)s", proc.stdout.split("wall time")[1]))
    assert list(split) == ["import", "extract", "tune", "compile"]
    assert sum(int(split[k]) for k in ("import", "extract", "tune")) <= budget  # tuning ended in time to compile
    trials = stores.create(url).get_trials(1)
    assert trials and max(t.timestamp for t in trials) < start + budget
    assert min(t.timestamp for t in trials) - start < 30  # the first slot ends half a minute in at the latest
