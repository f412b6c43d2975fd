"""Selective tuning and warm starts in real sessions: transfer slots, fallback, resume, and a second model."""

import math

import pytest

from tunewise import sharing


def _pair_module():
    """Two 3x3 convolutions (with bias and ReLU) of different channel counts: similar, not equal; and an input."""
    import torch

    class Pair(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(8, 16, 3, padding=1)
            self.b = torch.nn.Conv2d(16, 16, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.b(torch.relu(self.a(x))))

    torch.manual_seed(0)
    return Pair().eval(), (torch.randn(1, 8, 12, 12),)


@pytest.fixture(scope="module")
def pair(host_target, measurer):
    from tunewise.importing import frontend
    from tunewise.lowering import tasks

    module, inputs = _pair_module()
    return tasks.extract(frontend.load(module, example_inputs=inputs), host_target, measurer=measurer)


def _convolutions(model):
    return [k for k, t in enumerate(model.tasks) if "conv2d" in t.name]


def _session(model, measurer, store, run, **kwargs):
    from tunewise import schedulers
    from tunewise.callbacks import SlotLog
    from tunewise.tuning import session

    log = SlotLog()
    loop = session.Session(model, schedulers.create("round-robin"), session.Budget(max_trials=kwargs.pop("trials")),
                           measurer, store, run, session.SessionParts(trials_per_slot=3, callbacks=[log],
                                                                      warm_start=False, **kwargs))
    return loop, log


@pytest.mark.tvm
def test_only_representatives_are_searched_and_members_get_their_schedules(pair, measurer):
    from tunewise import stores
    from tunewise.delivery import compile as compiler

    store = stores.create("sqlite://")
    run = store.create_run(pair.name, str(pair.target), "round-robin", {})
    loop, log = _session(pair, measurer, store, run, share="selective", trials=12)
    a, b = _convolutions(pair)
    selection = loop.selection
    assert selection.group[a] == selection.group[b]
    member = a if selection.source[a] is not None else b
    representative = selection.source[member]
    assert representative in (a, b) and representative != member
    final = loop.run()
    member_events = [e for e in log.events if e.task == member]
    # a member still held at the end was never searched: every slot of it measured its representative's
    # records, one at a time (top-1); one that fell back (its transfer did not pay here) was searched after
    assert member_events and all(e.trials <= 1 for e in member_events if e.shared)
    if final.tasks[member].source is not None:
        assert all(e.shared == e.trials <= 1 for e in member_events)
    workload = loop.database.workload_id(pair.task_mods[member])
    mine = [t for t in loop.trials if t.task == member]
    assert all(t.workload == workload for t in mine) and any(math.isfinite(t.latency) for t in mine)
    assert final.tasks[member].source in (representative, None)  # held, unless it fell back
    # resumed from the store alone, the run is where it was: same held members, same progress
    again, _ = _session(pair, measurer, store, run, share="selective", trials=12)
    assert [(t.source, t.trials, t.best_history, t.finished) for t in again.snapshot().tasks] == [
        (t.source, t.trials, t.best_history, t.finished) for t in final.tasks]
    compiled = compiler.CompiledModel(compiler.build(pair, loop.database), pair.target)
    assert compiler.verify(compiled, pair.inputs, pair.reference_outputs) < 1e-5


@pytest.mark.tvm
def test_a_selective_run_stopped_mid_tuning_resumes_with_its_members_still_held(pair, measurer):
    """A run stopped after a few slots, restored by a new session from the store alone (as a resume does), goes
    on to its budget with the members it held: nothing lost or measured twice, and a member still held at the end
    was never searched, before the stop or after; one that fell back was searched only after its transfers."""
    from tunewise import stores

    store, trials = stores.create("sqlite://"), 14
    run = store.create_run(pair.name, str(pair.target), "round-robin", {})
    first, first_log = _session(pair, measurer, store, run, share="selective", trials=5)
    stopped = first.run()
    before = store.get_trials(run)
    held = {k: t.source for k, t in enumerate(stopped.tasks) if t.source is not None}
    assert len(before) == 5 and held
    loop, log = _session(pair, measurer, store, run, share="selective", trials=trials)
    assert [t.source for t in loop.snapshot().tasks] == [t.source for t in stopped.tasks]  # the same members
    final = loop.run()
    after = store.get_trials(run)
    assert after[:len(before)] == before and len(after) == trials  # nothing lost, the budget counted it
    assert len({t.candidate for t in after}) == trials  # nothing measured twice
    cut = {id(first_log.events[-1]), id(log.events[-1])}  # the slots a budget may have cut short
    for k in held:  # a member's slots measure its representative's records, one each, until it falls back
        mine = [e for e in first_log.events + log.events if e.task == k]
        transfers = next((i for i, e in enumerate(mine) if e.shared == 0), len(mine))
        assert all(e.shared == e.trials == 1 for e in mine[:transfers])
        assert all(e.trials == 3 for e in mine[transfers:] if id(e) not in cut)  # then searched, whole slots
        if final.tasks[k].source is not None:  # still held: never searched
            assert final.tasks[k].source == held[k] and transfers == len(mine)


@pytest.mark.tvm
def test_a_member_whose_transfer_does_not_apply_falls_back_to_its_own_search(pair, measurer):
    from tunewise import stores

    store = stores.create("sqlite://")
    run = store.create_run(pair.name, str(pair.target), "round-robin", {})
    loop, _ = _session(pair, measurer, store, run, share="off", trials=10)
    member = next(k for k, t in enumerate(pair.tasks) if "conv2d" not in t.name)  # a transpose
    sources = [None] * len(pair.tasks)
    sources[member] = _convolutions(pair)[0]  # a convolution's trace names blocks the transpose does not have
    loop.ledger.set_members(sharing.Members(sources, sharing.flop_shares(pair.tasks)))
    assert member not in [t.index for t in loop.snapshot().live]
    final = loop.run()
    checkpoints = [c for c in store.get_checkpoints(run) if c.task == member]
    # its transfer slot measured nothing (stored as such); it is now searched like any task, not finished
    assert checkpoints[0].trials == 0
    assert final.tasks[member].source is None and not final.tasks[member].finished
    assert member in [t.index for t in final.live]


@pytest.fixture(scope="module")
def two_dense(host_target, measurer):
    """Two one-task models: a dense layer with bias and ReLU, and one of another shape with bias and ReLU6."""
    import torch

    from tunewise.importing import frontend
    from tunewise.lowering import tasks

    def dense(name, inputs, outputs, rows, activation):
        torch.manual_seed(0)
        layer = torch.nn.Sequential(torch.nn.Linear(inputs, outputs), activation).eval()
        imported = frontend.load(layer, example_inputs=(torch.randn(rows, inputs),))
        import dataclasses

        return dataclasses.replace(tasks.extract(imported, host_target, measurer=measurer), name=name)

    return dense("small", 16, 32, 4, torch.nn.ReLU()), dense("large", 24, 48, 6, torch.nn.ReLU6())


@pytest.mark.tvm
def test_a_new_model_starts_warm_from_another_runs_records_in_a_sqlite_store(two_dense, measurer, tmp_path):
    from tunewise import schedulers, stores
    from tunewise.callbacks import SlotLog
    from tunewise.tuning import session

    small, large = two_dense
    store = stores.create(f"sqlite:///{tmp_path}/tunewise.db")

    def tune(model, warm_start):
        run = store.create_run(model.name, str(model.target), "round-robin", {})
        log = SlotLog()
        loop = session.Session(model, schedulers.create("round-robin"), session.Budget(max_trials=3), measurer,
                               store, run, session.SessionParts(trials_per_slot=3, callbacks=[log],
                                                                warm_start=warm_start))
        loop.run()
        return log.events, loop

    events, _ = tune(small, True)
    assert events[0].shared == 0  # nothing else in the store: it starts cold
    cold, _ = tune(large, False)
    assert cold[0].shared == 0
    warm, loop = tune(large, True)
    # the large dense layer's first slot measures the small one's best record, fitted to its shape and epilogue
    assert warm[0].shared == 1 and warm[0].trials == 1
    measured = [t for t in loop.trials if t.slot == warm[0].slot]
    assert len(measured) == 1 and math.isfinite(measured[0].latency)
    assert len(warm) == 2 and warm[1].shared == 0 and warm[1].trials == 2  # then it searches
    assert measured[0].workload == loop.database.workload_id(large.task_mods[0])
