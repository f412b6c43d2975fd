"""A real tuning run of tiny-mlp's two dense tasks: records, budgets and the latency curve."""

import json
import math

import pytest

from tunewise import schedulers, stores
from tunewise.errors import InputError
from tunewise.schedulers._prior import heaviest_first
from tunewise.tuning import search, session

pytestmark = pytest.mark.tvm


def new_run(store, model, scheduler="round-robin"):
    return store.create_run(model.name, str(model.target), scheduler, {})


@pytest.fixture(scope="module")
def tuned(tuned_store):
    store, (run, _), events = tuned_store
    return run, run.snapshot(), run.database, events, store


def test_budgets_are_respected(tuned):
    run, final, *_ = tuned
    assert final.trials == len(run.trials) == 20
    assert all(t.trials <= 12 for t in final.tasks)
    # round robin, 6 a slot, heaviest first: the heavier task is capped at 12
    heavy = max(final.tasks, key=lambda t: (t.weight * t.default_latency, -t.index))
    assert [t.trials for t in final.tasks] == [12 if t is heavy else 8 for t in final.tasks]
    assert [t.finished for t in final.tasks] == [t is heavy for t in final.tasks]


def test_every_trial_is_recorded_in_the_store_and_the_database(tuned, tiny_mlp):
    run, final, database, _, store = tuned
    trials = store.get_trials(run.run_id)
    assert trials == run.trials and len(trials) == 20
    assert {t.task for t in trials} == {0, 1}
    assert store.get_run(run.run_id).status == stores.TUNED
    assert [t.name for t in store.get_tasks(run.run_id)] == [t.name for t in tiny_mlp.tasks]
    assert len({t.candidate for t in trials}) == 20  # no candidate measured twice
    for t in trials:
        assert (t.error is None) == bool(t.run_secs)
        assert t.build_seconds >= 0 and t.run_seconds > 0
        assert isinstance(json.loads(t.record), list)  # MetaSchedule's JSON of the tuning record
    checkpoints = store.get_checkpoints(run.run_id)
    assert [c.trials for c in checkpoints] == [6, 6, 6, 2]
    assert [(c.elapsed, c.latency) for c in checkpoints] == run.history[1:]
    every = store.get_trials()  # this run's and the store's other run's: the searches share them
    assert len(database.get_all_tuning_records()) == len(every) > 20
    best = [min(t.latency for t in every if t.workload == run.database.workload_id(mod)) for mod in tiny_mlp.task_mods]
    for k, mod in enumerate(tiny_mlp.task_mods):
        top = database.get_top_k(database.commit_workload(mod), 1)[0]
        assert sum(float(s) for s in top.run_secs) / len(top.run_secs) == pytest.approx(best[k])


def test_latency_curve_is_monotone_and_timestamped(tuned, tiny_mlp):
    run, final, _, events, _ = tuned
    history = run.history
    assert history[0] == (0.0, pytest.approx(tiny_mlp.untuned_latency()))
    assert len(history) == len(events) + 1
    times, estimates = zip(*history, strict=True)
    assert all(a <= b for a, b in zip(times, times[1:], strict=False))
    assert all(b <= a for a, b in zip(estimates, estimates[1:], strict=False))
    expected = sum(t.weight * min(t.best, t.default_latency) for t in final.tasks)
    assert estimates[-1] == pytest.approx(expected)
    for event, snapshot in events:
        assert event.trials > 0 and event.seconds >= event.search_seconds + event.measure_seconds
        assert snapshot.tasks[event.task].best == event.best_after <= event.best_before


def test_each_task_has_a_valid_best(tuned):
    _, final, *_ = tuned
    for task in final.tasks:
        assert math.isfinite(task.best) and task.gflops > 0
        assert list(task.best_history) == sorted(task.best_history, reverse=True)


def test_time_budget_and_patience_stop_the_run(tiny_mlp, measurer):
    store = stores.create("sqlite://")
    run = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(time_budget=1e-3),
                          measurer, store, new_run(store, tiny_mlp), session.SessionParts(trials_per_slot=3))
    final = run.run()
    # no room for a first slot in the time limit (a slot is never cut short): the default latencies alone
    assert final.trials == 0 and all(t.default_latency > 0 for t in final.tasks)
    run = session.Session(tiny_mlp, schedulers.create("sequential"),
                          session.Budget(max_trials=100, patience=1), measurer, store, new_run(store, tiny_mlp),
                          session.SessionParts(trials_per_slot=4))
    final = run.run()
    # patience 1: a task is finished by its first slot that does not improve on its best (a microsecond kernel
    # can improve by noise a few slots running: the trial budget leaves room for that)
    assert all(t.finished for t in final.tasks) and final.trials < 100


def test_the_cost_model_learns_from_every_slot(tiny_mlp, measurer):
    # A task's queue of 64 candidates outlasts short runs: the model must not wait for it to drain.
    import numpy as np
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.cost_model import PyCostModel

    updates = []

    @derived_object
    class Recording(PyCostModel):
        def load(self, path):
            pass

        def save(self, path):
            pass

        def update(self, context, candidates, results):
            updates.append((context.task_name, len(candidates), sum(r.run_secs is not None for r in results)))

        def predict(self, context, candidates):
            return np.zeros(len(candidates))

    store = stores.create("sqlite://")
    run = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(max_trials=12), measurer,
                          store, new_run(store, tiny_mlp), session.SessionParts(trials_per_slot=3,
                                                                                cost_model=Recording()))
    run.run()
    names = [t.name for t in heaviest_first(run.snapshot().tasks)]  # round-robin's order
    assert [(name, n) for name, n, _ in updates] == [(names[0], 3), (names[1], 3)] * 2
    assert sum(valid for *_, valid in updates) == sum(t.error is None for t in run.trials)


@pytest.mark.parametrize("kwargs", [{"max_trials": 0}, {"time_budget": -1}, {"per_task_trials": 1.5e300 * 1e10},
                                    {"patience": True}])
def test_bad_budgets(kwargs):
    with pytest.raises(InputError, match=f"budget {next(iter(kwargs)).replace('_', '-')} must be a positive number"):
        session.Budget(**kwargs)


def test_a_run_without_a_run_wide_limit_is_refused(tiny_mlp, measurer):
    store = stores.create("sqlite://")
    run = new_run(store, tiny_mlp)
    with pytest.raises(InputError, match="set a budget"):
        session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(patience=4), measurer, store, run)


@pytest.mark.timing
def test_the_first_trial_is_measured_soon_after_tuning_starts(tiny_mlp, measurer):
    # the cost model has learnt nothing yet: the first slot samples the design space at random, where the
    # evolutionary search would spend seconds ranking its population by the untrained model
    import time

    from tunewise.callbacks import Callback

    events = []

    class Timed(Callback):
        def slot_recorded(self, event, snapshot):
            events.append((event, time.perf_counter()))

    store = stores.create("sqlite://")
    run = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(max_trials=8), measurer, store,
                          new_run(store, tiny_mlp), session.SessionParts(trials_per_slot=4, callbacks=[Timed()]))
    start = time.perf_counter()
    run.run()
    (first, first_at), (second, _) = events[:2]
    assert first.trials == 4 and first.search_seconds < 1.0
    assert first_at - start < 10.0
    assert second.search_seconds > first.search_seconds  # the other task's first slot: the cost model has data


def test_a_task_search_evolves_a_population_sized_to_one_slot_and_leaves_nothing_unused(tiny_mlp, measurer):
    # the evolutionary search's cost grows with its population: each call evolves eight members a candidate
    # (at least MIN_POPULATION) and returns one slot's worth, so a scheduler that moves on wastes no search;
    # a small population's random members are half of it, not MetaSchedule's 50
    store = stores.create("sqlite://")
    run = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(max_trials=16), measurer, store,
                          new_run(store, tiny_mlp), session.SessionParts(trials_per_slot=4))
    run.run()
    assert [t.task for t in run.trials].count(0) == [t.task for t in run.trials].count(1) == 8
    for task_search in run._searches:  # the first slot sampled at random, the second searched
        strategy = task_search.context.search_strategy
        assert strategy.population_size == 32 and strategy.init_min_unmeasured == 16
        assert task_search.context.search_strategy.genetic_num_iters == search.GENERATIONS
        assert len(task_search._queue) <= task_search.duplicates  # left over only where a search ran again
    wide = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(max_trials=4), measurer, store,
                           new_run(store, tiny_mlp), session.SessionParts(trials_per_slot=4, search_batch=20))
    wide._searches[0].propose(4, wide.database, wide.cost_model, 100)
    strategy = wide._searches[0].context.search_strategy
    assert strategy.population_size == 160 and strategy.init_min_unmeasured == search.RANDOM_MEMBERS == 50


class _Replay:
    """Stands in for a task search's MetaSchedule context: hands out recorded batches of real candidates, in
    order, then ``None``; counts its calls."""

    def __init__(self, batches):
        self.batches, self.calls = list(batches), 0

    def generate_measure_candidates(self):
        self.calls += 1
        return self.batches.pop(0) if self.batches else None


def test_a_search_that_proposes_measured_candidates_searches_again_until_the_slot_is_full(tiny_mlp, measurer):
    # a resumed run's search can propose records it was seeded with from the database: those are dropped and
    # the slot is filled from the next search, not left short
    store = stores.create("sqlite://")
    run = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(max_trials=4), measurer, store,
                          new_run(store, tiny_mlp), session.SessionParts(trials_per_slot=4))
    first = run._searches[0]
    real = first.propose(4, run.database, run.cost_model, 100) + first.propose(4, run.database, run.cost_model, 100)
    candidates = [c for c, _ in real]
    assert len({h for _, h in real}) == 8

    resumed = search.TaskSearch(tiny_mlp.task_mods[0], "resumed", tiny_mlp.target, 0, 1, 4)
    resumed.context = _Replay([candidates[:4], candidates[2:6], candidates[6:]])
    resumed.seen = {h for _, h in real[:3]}  # measured before the resume
    got = resumed.propose(4, run.database, run.cost_model, 100)
    assert [h for _, h in got] == [h for _, h in real[3:7]] and resumed.duplicates == 3 + 2
    assert resumed.context.calls == 3 and not resumed.searches(1, untrained=False)  # real[7] is queued

    exhausted = search.TaskSearch(tiny_mlp.task_mods[0], "exhausted", tiny_mlp.target, 0, 1, 4)
    exhausted.context = _Replay([candidates[:4]] * 10)
    exhausted.seen = {h for _, h in real}
    assert exhausted.propose(4, run.database, run.cost_model, 100) == []  # ends: nothing new comes
    assert exhausted.context.calls == search.BARREN_SEARCHES


def test_a_new_run_tunes_the_heaviest_task_by_flops_before_measuring_default_latencies(tiny_mlp, measurer):
    import dataclasses

    from tunewise.callbacks import Callback

    unmeasured = dataclasses.replace(tiny_mlp, tasks=tuple(dataclasses.replace(t, default_latency=math.inf)
                                                           for t in tiny_mlp.tasks), defaults_measured=False)
    heaviest = max(range(2), key=lambda k: tiny_mlp.tasks[k].weight * tiny_mlp.tasks[k].flops)
    phases = []

    class Phases(Callback):
        def slot_phase(self, snapshot, task, phase):
            phases.append((snapshot.slot, task, phase, math.isfinite(snapshot.untuned_latency())))

    store = stores.create("sqlite://")
    run_id = new_run(store, tiny_mlp)
    run = session.Session(unmeasured, schedulers.create("round-robin"), session.Budget(max_trials=8), measurer,
                          store, run_id, session.SessionParts(trials_per_slot=4, callbacks=[Phases()]))
    assert store.get_tasks(run_id) == []  # added once their default latencies are known
    final = run.run()
    assert phases[:4] == [(0, heaviest, p, False) for p in ("search", "build", "measure", "default latencies")]
    assert [t.task for t in run.trials[:4]] == [heaviest] * 4
    defaults = [t.default_latency for t in run.model.tasks]
    assert run.model.defaults_measured and all(0 < d < math.inf for d in defaults)
    assert [t.default_latency for t in store.get_tasks(run_id)] == defaults
    assert run.history[0] == (0.0, final.untuned_latency()) and final.untuned_latency() < math.inf
    # resumed from the store, with the model as extracted again: the stored defaults and the same slots
    again = session.Session(unmeasured, schedulers.create("round-robin"), session.Budget(max_trials=8), measurer,
                            store, run_id, session.SessionParts(trials_per_slot=4))
    assert [t.default_latency for t in again.model.tasks] == defaults
    assert again.snapshot().trials == 8 and again.ledger.ask() is None


@pytest.mark.parametrize("phase", ["measure", "default latencies"])
def test_a_ctrl_c_during_the_opening_slot_records_it_before_stopping(tiny_mlp, measurer, phase):
    """A first Ctrl-C finishes the slot in flight and records it: the opening slot too, whose default latencies
    are measured after its candidates."""
    import dataclasses
    import signal

    from tunewise.callbacks import Callback
    from tunewise.job import interrupts

    unmeasured = dataclasses.replace(tiny_mlp, tasks=tuple(dataclasses.replace(t, default_latency=math.inf)
                                                           for t in tiny_mlp.tasks), defaults_measured=False)

    class CtrlC(Callback):
        def slot_phase(self, snapshot, task, slot_phase):
            if slot_phase == phase:
                interrupts._handle(signal.SIGINT, None)  # what the signal handler does on a Ctrl-C

    store = stores.create("sqlite://")
    run_id = new_run(store, tiny_mlp)
    run = session.Session(unmeasured, schedulers.create("round-robin"), session.Budget(max_trials=8), measurer,
                          store, run_id, session.SessionParts(trials_per_slot=4, callbacks=[CtrlC()]))
    with interrupts.handled(), pytest.raises(interrupts.Interrupted, match="^SIGINT$"):
        run.run()
    assert store.get_run(run_id).status == stores.INTERRUPTED
    assert len(store.get_trials(run_id)) == 4 and [c.trials for c in store.get_checkpoints(run_id)] == [4]
    again = session.Session(unmeasured, schedulers.create("round-robin"), session.Budget(max_trials=8), measurer,
                            store, run_id, session.SessionParts(trials_per_slot=4))
    assert again.snapshot().trials == 4 and again.model.defaults_measured
    assert again.run().trials == 8
