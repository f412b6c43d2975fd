"""Callbacks: told every recorded slot by a real session, built by name, several told as one."""

import pytest

from tunewise import callbacks, schedulers, stores
from tunewise.errors import InputError
from tunewise.tuning import session


class Phases(callbacks.Callback):
    """Keeps the phases of the slots in flight, as ``(slot, task, phase)``."""

    def __init__(self):
        self.seen = []

    def slot_phase(self, snapshot, task, phase):
        self.seen.append((snapshot.slot, task, phase))


@pytest.mark.tvm
def test_callbacks_are_told_every_recorded_slot(tiny_mlp, measurer):
    store = stores.create("sqlite://")
    run = store.create_run(tiny_mlp.name, str(tiny_mlp.target), "round-robin", {})
    log, phases = callbacks.SlotLog(), Phases()
    loop = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(max_trials=10), measurer,
                           store, run, session.SessionParts(trials_per_slot=3, callbacks=[log, phases]))
    final = loop.run()
    recorded = [c for c in store.get_checkpoints(run) if c.trials > 0]
    assert [(e.slot, e.task, e.trials) for e in log.events] == [(c.slot, c.task, c.trials) for c in recorded]
    assert sum(e.trials for e in log.events) == final.trials == len(store.get_trials(run)) == 10
    # each snapshot is the run just after its slot
    assert [s.trials for _, s in log.slots] == [sum(e.trials for e in log.events[:i + 1])
                                                for i in range(len(log.events))]
    for event in log.events:
        assert [p for s, t, p in phases.seen if s == event.slot] == ["search", "build", "measure"]


def test_create_builds_by_name_and_rejects_unknown_names():
    log = callbacks.create("slot-log")
    assert isinstance(log, callbacks.SlotLog) and callbacks.create(log) is log
    from tunewise.callbacks._progress import LiveProgress

    assert isinstance(callbacks.create("progress"), LiveProgress)
    with pytest.raises(InputError, match="unknown callback 'beep'; valid names: progress, slot-log"):
        callbacks.create("beep")


def test_a_callback_list_tells_each_in_order():
    told = []

    class Named(callbacks.Callback):
        def __init__(self, name):
            self.name = name

        def phase(self, text):
            told.append((self.name, text))

        def tuning_finished(self):
            told.append((self.name, "end"))

    both = callbacks.CallbackList([Named("a"), Named("b"), "slot-log"])
    both.phase("importing")
    both.slot_recorded("event", "snapshot")
    both.tuning_finished()
    assert told == [("a", "importing"), ("b", "importing"), ("a", "end"), ("b", "end")]
    assert both.callbacks[2].slots == [("event", "snapshot")]
