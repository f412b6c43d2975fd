"""Putting a run together: prepare_run gives a session that tunes and records as its settings say."""

import math
import os

import pytest

from tunewise import callbacks, energy, stores
from tunewise.job import prepare
from tunewise.settings import RunSettings
from tunewise.tuning import measure
from tunewise.tuning.session import Budget

pytestmark = pytest.mark.tvm

QUICK = measure.MeasureConfig(number=2, min_repeat_ms=10)


def test_prepare_run_gives_a_working_session(tmp_path):
    settings = RunSettings(source="tiny-mlp", budget=Budget(max_trials=4), trials_per_slot=2, scheduler="round-robin",
                           evaluator="fixed", measure=QUICK)
    store = stores.create(f"sqlite:///{tmp_path}/tunewise.db")
    log = callbacks.SlotLog()
    told = []

    class Steps(callbacks.Callback):
        def phase(self, text):
            told.append(text)

    with prepare.prepare_run(None, settings, store=store, callbacks=[log, Steps()]) as prepared:
        final = prepared.session.run()
    assert told == ["importing the model", "extracting tasks"]
    assert final.trials == 4 and [e.trials for e in log.events] == [2, 2]
    assert not prepared.model.defaults_measured  # the session measured them after its first slot
    tasks = prepared.session.model.tasks
    assert len(tasks) == 2 and all(0 < t.default_latency < math.inf for t in tasks)
    assert [s.default_latency for s in store.get_tasks(prepared.session.run_id)] == [t.default_latency for t in tasks]
    run = store.get_run(prepared.session.run_id)
    assert (run.model, run.scheduler, run.status) == ("tiny-mlp", "round-robin", stores.TUNED)
    assert RunSettings.from_json(run.settings) == RunSettings(
        source="tiny-mlp", budget=Budget(max_trials=4), trials_per_slot=2, scheduler="round-robin", evaluator="fixed",
        measure=QUICK, output=os.path.abspath(os.path.join("tunewise-out", "tiny-mlp")),
        # the meter "auto" chose here and the CPU's graph level, which a resumed run keeps
        energy_meter=energy.for_device("auto", gpu=False).name, level="winograd")
    assert len(store.get_trials(run.id)) == 4


def test_open_session_tunes_an_extracted_model_again(tiny_mlp, measurer):
    store = stores.create("sqlite://")
    settings = RunSettings(budget=Budget(max_trials=2), trials_per_slot=2, scheduler="random", seed=5)
    runs = [prepare.open_session(tiny_mlp, settings, store=store, measurer=measurer) for _ in range(2)]
    for loop in runs:
        assert loop.run().trials == 2
    assert [r.id for r in store.get_runs()] == [loop.run_id for loop in runs]
    assert all(r.settings["seed"] == 5 and r.scheduler == "random" for r in store.get_runs())


def test_a_callers_model_check_replaces_the_settings_checks(tiny_mlp, measurer):
    from tunewise.tuning.model_checks import DEFAULT_EVERY, NEVER, ModelCheck

    store = stores.create("sqlite://")
    settings = RunSettings(budget=Budget(max_trials=2), check_every=60.0)
    assert prepare.open_session(tiny_mlp, settings, store=store, measurer=measurer).checker.every == 60.0
    mine = ModelCheck(5.0)
    assert prepare.open_session(tiny_mlp, settings, store=store, measurer=measurer,
                                resolved=prepare.Resolved(checker=mine)).checker is mine
    assert prepare.open_session(tiny_mlp, RunSettings(budget=Budget(max_trials=2)), store=store,
                                measurer=measurer).checker.every == DEFAULT_EVERY  # checks by default
    assert prepare.open_session(tiny_mlp, RunSettings(budget=Budget(max_trials=2), check_every=NEVER), store=store,
                                measurer=measurer).checker is None


def test_a_measurer_worker_killed_by_ctrl_c_as_it_starts_is_an_interruption(tmp_path, monkeypatch):
    # Ctrl-C goes to the whole process group: a measurer's worker still starting (while the model is imported and
    # its tasks extracted) dies of it, and its error reaches the run only after the stop was asked for
    import signal
    import threading
    import time

    from tunewise.job import interrupts
    from tunewise.lowering import tasks

    extracted, extract = threading.Event(), tasks.extract

    def extract_then_say(*args, **kwargs):
        model = extract(*args, **kwargs)
        extracted.set()
        return model

    def killed_while_starting(target, settings):
        extracted.wait(60)
        time.sleep(0.5)  # the run waits for its measurer by now
        interrupts._handle(signal.SIGINT, None)  # the Ctrl-C the terminal sent the group
        raise ChildProcessError("Subprocess terminated")

    monkeypatch.setattr(tasks, "extract", extract_then_say)
    monkeypatch.setattr(prepare, "make_measurer", killed_while_starting)
    settings = RunSettings(source="tiny-mlp", budget=Budget(max_trials=4))
    with interrupts.handled(), pytest.raises(interrupts.Interrupted, match="^SIGINT$"):
        prepare.prepare_run(None, settings, store=stores.create(f"sqlite:///{tmp_path}/tunewise.db"))
