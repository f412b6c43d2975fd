"""Schedule sharing: anchor groups, offers, and real transfers between two convolutions of one shape."""

import math

import pytest

from tunewise import callbacks, sharing


def test_groups_pair_tasks_with_the_same_non_empty_anchor():
    assert sharing.groups(["a", "", "b", "a", "", "a"]) == ((3, 5), (), (), (0, 5), (), (0, 3))
    assert sharing.groups([]) == ()


def _records(table):
    """``records_of`` over ``{task: [(candidate, latency), ...]}`` (best first), the trial being the hash."""
    return lambda j, top: [(c, latency, c) for c, latency in table.get(j, [])[:top]]


def test_offers_are_the_mates_faster_records_fastest_first_and_made_once():
    offers = sharing.Offers(["x", "x", "x", "y"], top=2)
    table = {1: [("p", 3.0), ("q", 5.0), ("r", 6.0)], 2: [("s", 4.0), ("t", math.inf)], 3: [("u", 1.0)]}
    assert offers.shares(0) and not offers.shares(3)
    due = offers.pending(0, math.inf, _records(table))
    assert [c for c, _ in due] == ["p", "s", "q"]  # top 2 of each mate, never task 3's, never a failure
    assert [c for c, _ in offers.pending(0, 4.5, _records(table))] == ["p", "s"]  # only what beats the best
    offers.given(0, "p")
    assert [c for c, _ in offers.pending(0, math.inf, _records(table))] == ["s", "q"]
    assert [c for c, _ in offers.pending(1, math.inf, _records(table))] == ["s"]  # each task keeps its own


def _twin(host_target, level: str, measurer=None):
    """Two 3x3 convolutions of one shape, one with bias + ReLU fused after it, the other with bias + a residual
    add: two tasks with one anchor block, at graph ``level`` (at ``prepack`` their weights and biases are
    layout-free: a schedule reads them in layouts of its own); with a ``measurer``, their default latencies
    measured."""
    import torch

    from tunewise.importing import frontend
    from tunewise.lowering import tasks

    class Twin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(8, 8, 3, padding=1)
            self.b = torch.nn.Conv2d(8, 8, 3, padding=1)

        def forward(self, x):
            return self.b(torch.relu(self.a(x))) + x

    torch.manual_seed(0)
    imported = frontend.load(Twin().eval(), example_inputs=(torch.randn(1, 8, 16, 16),))
    return tasks.extract(imported, host_target, level=level, measurer=measurer)


@pytest.fixture(scope="module")
def twin(host_target, measurer):
    """:func:`_twin` at the CPU's default graph level, its default latencies measured."""
    from tunewise.lowering import graph

    return _twin(host_target, graph.default_level(host_target), measurer)


def _conv_tasks(model):
    return [k for k, t in enumerate(model.tasks) if "conv2d" in t.name]


@pytest.mark.tvm
def test_convolutions_of_one_shape_share_an_anchor(twin):
    keys = [sharing.anchor_key(m) for m in twin.task_mods]
    a, b = _conv_tasks(twin)
    assert keys[a] == keys[b] != "" and twin.tasks[a].workload != twin.tasks[b].workload
    assert all(keys[k] != keys[a] for k in range(len(keys)) if k not in (a, b))


@pytest.mark.tvm
@pytest.mark.parametrize("share", ["same-anchor", "off"])
def test_a_mate_first_measures_the_transferred_schedules(twin, measurer, share):
    from tunewise import schedulers, stores
    from tunewise.callbacks import SlotLog
    from tunewise.delivery import compile as compiler
    from tunewise.tuning import session

    model = twin.heaviest(2)  # the two convolutions
    assert len(_conv_tasks(model)) == 2
    store = stores.create("sqlite://")
    run = store.create_run(model.name, str(model.target), "round-robin", {})
    log = SlotLog()
    budget = session.Budget(max_trials=8 if share == "off" else 10)  # off: two slots tell it
    loop = session.Session(model, schedulers.create("round-robin"), budget, measurer, store, run,
                           session.SessionParts(trials_per_slot=4,
                                                share=share, callbacks=[log]))
    loop.run()
    events = log.events
    first, second = events[0], events[1]
    assert first.shared == 0 and first.trials == 4
    if share == "off":
        assert second.shared == 0 and second.trials == 4 and loop.shared == 0
        return
    # the mate's two best records, transferred: measured as its own trials, before any search
    assert second.shared == second.trials == 2
    mine = [t for t in loop.trials if t.task == second.task]
    assert len(mine) == 2 and all(t.error is None for t in mine)
    assert all(t.workload == loop.database.workload_id(model.task_mods[second.task]) for t in mine)
    # the first task's next slot searches (its mate's records are its own schedules, measured already)
    assert len(events) == 3 and events[2].shared == 0 and loop.shared == 2
    compiled = compiler.CompiledModel(compiler.build(model, loop.database), model.target)
    assert compiler.verify(compiled, model.inputs, model.reference_outputs) < 1e-5


def _samples(mod, target, n: int) -> list:
    """``n`` random schedules of ``mod``, post-processed as measured candidates are."""
    from tvm.s_tir import meta_schedule as ms

    context = ms.TuneContext(mod, target=target, space_generator="post-order-apply", search_strategy="replay-trace",
                             task_name="conv", num_threads=1).clone()
    context.pre_tuning(n, n, context.generate_design_space(), ms.database.MemoryDatabase(),
                       ms.cost_model.RandomModel())
    return [c.sch for c in context.generate_measure_candidates()]


def _laid_out(mod) -> int:
    """How many weights a scheduled module reads in a layout of its own (MetaSchedule's layout rewrites)."""
    return mod.script().count("meta_schedule.layout_rewrite_preproc")


@pytest.mark.tvm
@pytest.mark.parametrize("level, laid_out", [("nhwc", 0), ("prepack", 2)])
def test_a_schedule_moved_to_a_mate_and_back_is_the_one_it_was(host_target, level, laid_out):
    from tvm_ffi import structural_equal

    model = _twin(host_target, level)
    first, second = (model.task_mods[k] for k in _conv_tasks(model))
    [own] = _samples(second, host_target, 1)
    for sch in _samples(first, host_target, 4):
        there = sharing.transfer(sch.trace, second, host_target)
        # the mate's weights laid out as its own searched schedules lay them out (bias included)
        assert _laid_out(there.mod) == _laid_out(own.mod) == _laid_out(sch.mod) == laid_out
        back = sharing.transfer(there.trace, first, host_target)
        assert structural_equal(back.mod, sch.mod)  # so that a task is not given its own schedule to measure again


@pytest.mark.tvm
def test_a_trace_that_does_not_apply_transfers_nothing(twin, host_target):
    import tvm
    from tvm import te

    a = te.placeholder((8,), name="a")
    other = tvm.IRModule({"main": te.create_prim_func([a, te.compute((8,), lambda i: a[i] * 2, name="double")])})
    first, second = (twin.task_mods[k] for k in _conv_tasks(twin))
    traces = [sch.trace for sch in _samples(first, host_target, 2)]
    assert all(sharing.transfer(trace, second, host_target) is not None for trace in traces)
    # its post-processing steps look for the convolution's loops in an elementwise function: TVM raises
    assert all(sharing.transfer(trace, other, host_target) is None for trace in traces)


@pytest.mark.tvm
def test_dynatune_sees_the_transferred_trials_of_a_mate(twin, measurer):
    from tunewise import stores
    from tunewise.schedulers import DynaTune
    from tunewise.tuning import session

    class Watching(DynaTune):
        """DynaTune that keeps every snapshot it is shown."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.seen = []

        def next(self, snapshot):
            self.seen.append(snapshot)
            return super().next(snapshot)

    model = twin.heaviest(2)
    store = stores.create("sqlite://")
    run = store.create_run(model.name, str(model.target), "dynatune", {})
    scheduler = Watching(seed=0, n_walkers=8, n_steps=40, burn_in=20)
    log = callbacks.SlotLog()
    loop = session.Session(model, scheduler, session.Budget(max_trials=10), measurer, store, run,
                           session.SessionParts(trials_per_slot=4,
                                                share="same-anchor", callbacks=[log]))
    final = loop.run()
    events = log.events
    assert final.trials == 10 and len(store.get_trials(run)) == 10 and loop.shared == 2
    # the warm-up gives each convolution a slot: the second one's is its mate's two best schedules, transferred
    first, second = events[0], events[1]
    assert first.shared == 0 and second.task != first.task and second.shared == second.trials == 2
    transferred = [t.latency for t in loop.trials if t.task == second.task][:2]
    assert all(math.isfinite(x) for x in transferred)
    after = scheduler.seen[2].tasks[second.task]  # what the scheduler was shown for the third slot
    assert after.trials == 2 and after.best_history == (min(transferred),)
    assert set(scheduler.expected_reduction(scheduler.seen[2])) == {first.task, second.task}
    assert len(scheduler.seen) == len(events) == 3  # 4 trials, 2 transferred, 4: the budget is spent
