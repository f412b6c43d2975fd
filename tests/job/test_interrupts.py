"""Stopping for real: Ctrl-C (SIGINT to the process group) and SIGTERM sent to a real ``tunewise tune``."""

import os
import signal
import time

import pytest

from tunewise import cli, stores

pytestmark = pytest.mark.tvm

TRIALS, PER_SLOT = 24, 2  # enough slots that a fast machine is still tuning when the signal comes


def tune_args(tmp_path, url: str) -> list:
    return ["tiny-mlp", "--trials", TRIALS, "--trials-per-slot", PER_SLOT, "--store", url, "-o", tmp_path / "out"]


@pytest.mark.parametrize("signum,group,times", [(signal.SIGINT, True, 1), (signal.SIGINT, True, 2),
                                               (signal.SIGTERM, False, 1)], ids=["SIGINT", "SIGINT-twice", "SIGTERM"])
def test_a_signal_stops_tuning_cleanly_and_the_run_resumes(tmp_path, capsys, tune_process, signum, group, times):
    """Ctrl-C (to the process group, as a terminal sends it) finishes the slot in flight; a second Ctrl-C or a
    SIGTERM (to the process) drops it. Either way the run is left ``interrupted`` with whole slots, and such a
    run resumes (resumed once: the stored state is the same whichever signal left it)."""
    url = f"sqlite:///{tmp_path}/tunewise.db"
    store = stores.create(url)
    tune = tune_process(*tune_args(tmp_path, url))
    tune.wait_for_trials(store, PER_SLOT)
    for _ in range(times):
        (os.killpg if group else os.kill)(tune.pid, signum)
        time.sleep(0.2)
    code, output = tune.wait(), tune.output()
    [run] = store.get_runs()
    assert code == 128 + signum, output
    before = store.get_trials(run.id)
    # what was kept, what was dropped (a stop at once drops the slot in flight, unless it came between slots)
    kept = f"tunewise: interrupted ({signal.Signals(signum).name}); the {len(before)} trials measured are in the store"
    resume = f": continue with tunewise tune --resume {run.id} --store {url}"
    dropped = f", and the slot in flight, {PER_SLOT} candidates, was dropped"
    last = output.splitlines()[-1]
    if (signum, times) == (signal.SIGINT, 1):
        assert last == kept + resume, output  # the slot in flight was finished and recorded
    else:
        assert last in (kept + resume, kept + dropped + resume), output
    assert "Traceback" not in output and "Segfault" not in output and "internal error" not in output
    assert store.get_run(run.id).status == stores.INTERRUPTED and store.get_run(run.id).owner is None
    assert len(before) == PER_SLOT * len(store.get_checkpoints(run.id)) and len(before) < TRIALS  # whole slots
    assert not any(t.error for t in before)  # no candidate failed for a worker stopped by the signal
    if (signum, times) != (signal.SIGINT, 1):
        return
    assert cli.main(["tune", "--no-references", "--timing-rounds", "3", "--resume", str(run.id), "--store", url]) == 0
    assert f"resumed after {len(before)} trials" in capsys.readouterr().err
    after = store.get_trials(run.id)
    assert after[:len(before)] == before and len(after) == TRIALS
    assert store.get_run(run.id).status == stores.FINISHED


def test_ctrl_c_before_tuning_says_nothing_was_measured(tmp_path, tune_process):
    url = f"sqlite:///{tmp_path}/tunewise.db"
    tune = tune_process(*tune_args(tmp_path, url))
    tune.wait_for_output("importing the model")
    os.killpg(tune.pid, signal.SIGINT)
    code, output = tune.wait(), tune.output()
    assert code == 130, output
    assert output.splitlines()[-1] == "tunewise: interrupted before any trial was measured; nothing to resume", output
    assert stores.create(url).count_trials() == 0
