"""One owner per run, for real: a second ``tunewise tune --resume`` of a run being tuned is refused, a killed
owner's run shows as dead and is taken over, and two resumes started at once leave the run whole."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tunewise import cli, lease, stores
from tunewise.errors import RunBusyError
from tunewise.stores import _base

TRIALS, PER_SLOT = 12, 2


def tune_args(tmp_path, url: str) -> list:
    return ["tiny-mlp", "--trials", TRIALS, "--trials-per-slot", PER_SLOT, "--store", url, "-o", tmp_path / "out"]


def status_in_runs(capsys, url: str, run: int) -> str:
    assert cli.main(["runs", "--store", url]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.split()[0] == str(run)]
    return line.split()[1]


def test_an_owner_is_gone_when_its_process_on_this_host_is():
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()
    assert _base.owner_gone(f"pid {ended.stdout.strip()} on {host} (0123abcd)")
    assert not _base.owner_gone(_base.owner_name())  # this process
    assert not _base.owner_gone(f"pid {ended.stdout.strip()} on other-{host} (0123abcd)")  # cannot tell: alive


def test_a_lease_beats_and_gives_the_run_up(tmp_path):
    store = stores.create(f"sqlite:///{tmp_path}/tunewise.db")
    run = store.create_run("m", "cpu", "random", {})
    with lease.Lease(interval=0.05) as owned:
        owned.claim(store, run)
        first = store.get_run(run).heartbeat
        with pytest.raises(RunBusyError):
            lease.Lease().claim(store, run)
        deadline = time.monotonic() + 10
        while store.get_run(run).heartbeat == first:
            assert time.monotonic() < deadline, "no heartbeat"
            time.sleep(0.05)
        assert store.get_run(run).owner == owned.owner
    assert store.get_run(run).owner is None


@pytest.mark.tvm
def test_a_run_being_tuned_has_one_owner_and_a_dead_one_is_taken_over(tmp_path, capsys, tune_process):
    url = f"sqlite:///{tmp_path}/tunewise.db"
    store = stores.create(url)
    first = tune_process(*tune_args(tmp_path, url))
    first.wait_for_trials(store, PER_SLOT)
    [run] = store.get_runs()
    assert store.get_run(run.id).owner.startswith(f"pid {first.pid} ")  # the new run is owned from its creation
    assert status_in_runs(capsys, url, run.id) == stores.RUNNING

    second = tune_process("--resume", run.id, "--store", url)
    assert second.wait() == 2
    [line] = second.output().splitlines()
    assert line.startswith(f"tunewise: error: run {run.id} is being tuned by another process (pid {first.pid} on ")

    os.kill(first.pid, signal.SIGKILL)  # the owner dies without giving the run up
    first.wait()
    assert store.get_run(run.id).status == stores.RUNNING
    assert status_in_runs(capsys, url, run.id) == stores.DEAD  # its process is gone
    before = store.get_trials(run.id)
    assert cli.main(["tune", "--no-references", "--resume", str(run.id), "--store", url]) == 0  # taken over
    after = store.get_trials(run.id)
    assert after[:len(before)] == before and len(after) == TRIALS
    assert [c.slot for c in store.get_checkpoints(run.id)] == list(range(TRIALS // PER_SLOT))
    assert store.get_run(run.id).status == stores.FINISHED and store.get_run(run.id).owner is None


@pytest.mark.tvm
def test_two_resumes_started_at_once_leave_the_run_whole(tmp_path, tune_process):
    url = f"sqlite:///{tmp_path}/tunewise.db"
    store = stores.create(url)
    first = tune_process(*tune_args(tmp_path, url))
    first.wait_for_trials(store, 2 * PER_SLOT)
    first.kill()
    [run] = store.get_runs()
    store.release_run(run.id, store.get_run(run.id).owner)  # as a run stopped cleanly leaves it: nobody owns it

    resumes = [tune_process("--resume", run.id, "--store", url) for _ in range(2)]
    codes = [r.wait() for r in resumes]
    assert sorted(codes) == [0, 2], [r.output() for r in resumes]
    loser = resumes[codes.index(2)].output()
    assert len(loser.splitlines()) == 1 and "is being tuned by another process" in loser
    assert len(store.get_trials(run.id)) == TRIALS
    assert [c.slot for c in store.get_checkpoints(run.id)] == list(range(TRIALS // PER_SLOT))
    assert len(store.get_artifacts(run.id)) == 1 and store.get_run(run.id).status == stores.FINISHED
