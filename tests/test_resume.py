"""Resume for real: ``tunewise tune`` killed with SIGKILL in the middle of tuning, its run taken over by one of
two ``--resume``s started at once; a run left by a full disk; a store copied elsewhere once a job has ended,
with a slot stored twice, then resumed there."""

import contextlib
import math
import os
import shutil
import subprocess

import pytest

from tunewise import cli, stores
from tunewise.delivery import timing
from tunewise.schedulers import Random
from tunewise.tuning.state import Snapshot, TaskView

pytestmark = pytest.mark.tvm

TRIALS, PER_SLOT = 12, 2


def random_choices(seed: int, slots: int) -> list[int]:
    """The tasks an uninterrupted random scheduler picks for tiny-mlp's two tasks (both stay live)."""
    scheduler, snapshot = Random(seed=seed), Snapshot((TaskView(0, "a", 1, 1.0, 1.0), TaskView(1, "b", 1, 1.0, 1.0)))
    return [scheduler.next(snapshot) for _ in range(slots)]


def tune_args(tmp_path, url: str) -> list:
    return ["tiny-mlp", "--trials", TRIALS, "--trials-per-slot", PER_SLOT, "--store", url, "-o", tmp_path / "out"]


def status_in_runs(capsys, url: str, run: int) -> str:
    assert cli.main(["runs", "--store", url]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.split()[0] == str(run)]
    return line.split()[1]


def test_a_killed_owners_run_is_taken_over_by_one_of_two_resumes_and_nothing_is_lost_or_repeated(tmp_path, capsys,
                                                                                                  tune_process):
    """The run's owner refuses a second tuner while it lives (stopped, it cannot finish meanwhile); killed
    (SIGKILL: no chance to say anything), the run shows as dead, and of two resumes started at once one takes it
    over and the other is refused. The resumed run lost nothing measured before the kill, measured no candidate
    twice, and went on as if never stopped."""
    from tunewise.stores._database import module_hash

    url = f"sqlite:///{tmp_path}/tunewise.db"
    store = stores.create(url)
    expected = random_choices(0, TRIALS // PER_SLOT)
    assert expected[2:] != expected[:-2] and expected[3:] != expected[:-3]  # a fresh scheduler would differ
    first = tune_process(*tune_args(tmp_path, url), "--scheduler", "random", "--seed", 0)
    first.wait_for_trials(store, 2 * PER_SLOT)
    first.pause(tmp_path / "tunewise.db")  # alive, but it cannot finish the run while the second one starts
    [run] = store.get_runs()
    assert store.get_run(run.id).owner.startswith(f"pid {first.pid} ")  # the new run is owned from its creation
    assert status_in_runs(capsys, url, run.id) == stores.RUNNING

    second = tune_process("--resume", run.id, "--store", url)
    assert second.wait() == 2
    [line] = second.output().splitlines()
    assert line.startswith(f"tunewise: error: run {run.id} is being tuned by another process (pid {first.pid} on ")

    first.kill()  # the owner dies without giving the run up
    assert store.get_run(run.id).status == stores.RUNNING  # nobody could say otherwise
    assert status_in_runs(capsys, url, run.id) == stores.DEAD  # its process is gone
    before = store.get_trials(run.id)
    assert len(before) % PER_SLOT == 0 and len(before) < TRIALS  # whole slots only; the one in flight is lost
    assert len(store.get_checkpoints(run.id)) == len(before) // PER_SLOT

    resumes = [tune_process("--resume", run.id, "--store", url) for _ in range(2)]
    codes = [r.wait() for r in resumes]
    assert sorted(codes) == [0, 2], [r.output() for r in resumes]
    loser = resumes[codes.index(2)].output()
    assert len(loser.splitlines()) == 1 and "is being tuned by another process" in loser
    assert f"resumed after {len(before)} trials" in resumes[codes.index(0)].output()
    assert "tasks; untuned estimate" in resumes[codes.index(0)].output()  # the stored default latencies

    after = store.get_trials(run.id)
    assert after[:len(before)] == before  # nothing lost
    assert len(after) == TRIALS  # the budget counted what was measured before the kill
    assert len({t.target for t in after}) == 1  # resumed on the very same target
    checkpoints = store.get_checkpoints(run.id)
    assert [c.task for c in checkpoints] == expected  # the scheduler went on as if never stopped
    assert [t.slot for t in after] == [s for s in range(TRIALS // PER_SLOT) for _ in range(PER_SLOT)]
    elapsed = [c.elapsed for c in checkpoints]
    assert elapsed == sorted(elapsed)  # tuning time continues from where it stopped
    # no candidate measured twice: the candidates' keys all differ, and so do the scheduled modules rebuilt here
    # from the stored records (as MetaSchedule's JSON database replays them: a layout rewrite's boolean
    # annotation comes back an integer, so they do not hash as the modules measured)
    database = stores.StoreDatabase(store)
    hashes = [module_hash(database.record(t).as_measure_candidate().sch.mod) for t in after]
    assert len({t.candidate for t in after}) == len(set(hashes)) == TRIALS
    assert store.get_run(run.id).status == stores.FINISHED and store.get_run(run.id).owner is None
    [artifact] = store.get_artifacts(run.id)
    assert artifact.metadata["trials"] == TRIALS and artifact.path == str(tmp_path / "out")
    assert_only_records_beating_the_defaults_are_applied(store, run)


def test_a_job_leaves_its_sqlite_store_whole_in_one_file_that_a_copy_resumes_even_with_a_slot_stored_twice(tmp_path):
    """The store file alone, copied once a job ended, resumes elsewhere; and so does a run whose last slot was
    stored a second time, as two processes tuning it at once would leave it (every stored trial counts against
    the budget, and new slots follow the last one)."""
    import tunewise
    from tunewise.tuning.session import Budget

    def left_beside(name: str) -> list[str]:
        return [f for f in (f"{name}-wal", f"{name}-shm") if os.path.exists(tmp_path / f)]

    tuned = tunewise.tune("tiny-mlp", budget=Budget(max_trials=4), trials_per_slot=2, compare_torch=False,
                          timing_rounds=3, progress=False, store=f"sqlite:///{tmp_path}/tunewise.db",
                          output=str(tmp_path / "out"))
    assert tuned.timing == timing.describe(3, references=False)  # the quicker finish asked for, no references
    assert left_beside("tunewise.db") == []  # the write-ahead log is folded into the file
    shutil.copy(tmp_path / "tunewise.db", tmp_path / "copy.db")  # the file alone, as a user moves a store
    with contextlib.closing(stores.create(f"sqlite:///{tmp_path}/copy.db")) as copy:
        last = copy.get_checkpoints(tuned.run)[-1]
        copy.add_trials(tuned.run, [t for t in copy.get_trials(tuned.run) if t.slot == last.slot], last)
        stored = copy.get_trials(tuned.run)
    assert len(stored) == 6
    resumed = tunewise.resume(tuned.run, store=f"sqlite:///{tmp_path}/copy.db", budget={"max_trials": 8},
                              compare_torch=False, timing_rounds=3, progress=False, output=str(tmp_path / "out2"))
    assert resumed.trials == 8 and left_beside("copy.db") == []
    with contextlib.closing(stores.create(f"sqlite:///{tmp_path}/tunewise.db", read_only=True)) as original, \
            contextlib.closing(stores.create(f"sqlite:///{tmp_path}/copy.db", read_only=True)) as copy:
        before, after = original.get_trials(tuned.run), copy.get_trials(tuned.run)
        assert len(before) == 4 and after[:6] == stored and stored[:4] == before and len(after) == 8
        slots = [c.slot for c in copy.get_checkpoints(tuned.run)]
        assert slots == sorted(slots) and len(set(slots)) == len(slots) - 1  # new slots follow the last one
        assert copy.get_run(tuned.run).status == stores.FINISHED
        assert original.get_run(tuned.run).status == stores.FINISHED and len(original.get_checkpoints(tuned.run)) == 2


def assert_only_records_beating_the_defaults_are_applied(store, run) -> None:
    """What the artifact of ``run`` applies (per task, the best record if it beats the task's default latency)
    is chosen against the default latencies the run measured when it started, as the resumed job used them."""
    from tunewise import target as targets
    from tunewise.delivery import compile as compiler
    from tunewise.importing import frontend
    from tunewise.lowering import tasks

    stored = store.get_tasks(run.id)
    assert all(0 < t.default_latency < math.inf for t in stored)
    model = tasks.extract(frontend.load(run.model), targets.resolve(run.target))
    model = model.with_default_latencies(t.default_latency for t in stored)
    chosen = compiler.best_records_database(model, stores.StoreDatabase(store, target=model.target))
    bests = {t.workload: min(x.latency for x in store.get_trials(run.id) if x.workload == t.workload) for t in stored}
    for mod, stored_task in zip(model.task_mods, stored, strict=True):
        applied = chosen.get_top_k(chosen.commit_workload(mod), 1) if chosen.has_workload(mod) else []
        if applied:
            latency = sum(float(s) for s in applied[0].run_secs) / len(applied[0].run_secs)
            assert latency < stored_task.default_latency
        else:  # the default schedule was kept: nothing the run measured beat it
            assert bests[stored_task.workload] >= stored_task.default_latency


@pytest.fixture
def small_filesystem(tmp_path):
    """A folder on a 4 MiB tmpfs of its own (mounting needs root)."""
    folder = tmp_path / "small"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_full_disk_while_tuning_is_one_line_and_the_run_resumes(tmp_path, capsys, tune_process, small_filesystem):
    url, trials = f"sqlite:///{small_filesystem}/tunewise.db", 3 * PER_SLOT
    store = stores.create(url)
    tune = tune_process("tiny-mlp", "--trials", trials, "--trials-per-slot", PER_SLOT, "--store", url,
                        "-o", tmp_path / "out")
    tune.wait_for_trials(store, PER_SLOT)
    with pytest.raises(OSError, match="No space left"), open(small_filesystem / "filler", "wb") as filler:
        while True:
            filler.write(bytes(1 << 16))
            filler.flush()
    code, output = tune.wait(), tune.output()
    [run] = store.get_runs()
    assert code == 2, output
    last = output.splitlines()[-1]
    assert last.startswith(f"tunewise: error: cannot use the store {url}: database or disk is full; "), output
    before = store.get_trials(run.id)
    assert last.endswith(f"; {len(before)} stored trials kept: once the store works again, continue with "
                         f"tunewise tune --resume {run.id} --store {url}"), output
    assert "Traceback" not in output
    assert len(before) >= PER_SLOT and store.get_run(run.id).state() == stores.FAILED

    os.remove(small_filesystem / "filler")
    assert cli.main(["tune", "--no-references", "--timing-rounds", "3", "--resume", str(run.id), "--store", url]) == 0
    capsys.readouterr()
    after = store.get_trials(run.id)
    assert after[:len(before)] == before and len(after) == trials
    assert store.get_run(run.id).status == stores.FINISHED
