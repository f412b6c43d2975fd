"""The run ledger: the rules every driver of a run shares, told by hand, by a real session and by a replay."""

import math

import pytest

from tunewise import schedulers
from tunewise.errors import InputError
from tunewise.lab.replay import TaskRun, Trace, TraceTask, replay
from tunewise.lab.synthetic import synthetic
from tunewise.tuning.ledger import Budget, Ledger, Pacing, Slot
from tunewise.tuning.state import Snapshot
from tunewise.tuning.timebudget import SlotPace

INF = math.inf
TASKS = (TraceTask("heavy", 2, 1e9, 4e-3), TraceTask("light", 1, 1e6, 1e-3))


class Scripted:
    """Chooses the tasks of ``script`` in turn; keeps every snapshot it was shown."""

    def __init__(self, script):
        self.script, self.seen = list(script), []

    def next(self, snapshot: Snapshot):
        self.seen.append(snapshot)
        return self.script.pop(0) if self.script else None


def ledger(script, budget, **kwargs):
    clock = kwargs.pop("clock", lambda: 0.0)
    return Ledger(TASKS, Scripted(script), budget, clock=clock, **kwargs)


def test_slot_sizes_follow_the_trial_budgets():
    book = ledger([0, 1, 0, 1], Budget(max_trials=10, per_task_trials=6), trials_per_slot=4)
    sizes = []
    while (slot := book.ask()) is not None:
        sizes.append((slot.task, slot.n))
        book.tell(slot, [1e-3] * slot.n)
    # heavy: 4 then the 2 left of its 6; light: 4; the run's 10 are then used
    assert sizes == [(0, 4), (1, 4), (0, 2)]
    assert book.trials == 10 and [t.finished for t in book.snapshot().tasks] == [True, False]


def test_patience_counts_trials_since_the_last_improvement():
    book = ledger([0] * 5, Budget(max_trials=100, patience=4), trials_per_slot=2)
    for latencies in ([3e-3, 2e-3], [2e-3, 2e-3], [1e-3, 5e-3], [1e-3, 1e-3], [4e-3, 9e-3]):
        slot = book.ask()
        book.tell(slot, latencies)
        if book.snapshot().tasks[0].finished:
            break
    task = book.snapshot().tasks[0]
    # the third slot improves (1 ms < 2 ms); the fourth and fifth add 4 trials without improving
    assert task.finished and task.trials == 10 and task.best == 1e-3 and task.best_history[-1] == 1e-3


def test_an_empty_or_exhausted_slot_finishes_the_task_and_failures_count():
    book = ledger([0, 1], Budget(max_trials=100), trials_per_slot=3)
    book.tell(book.ask(), [])
    slot = book.ask()
    book.tell(slot, [INF, 2e-3], exhausted=True)
    final = book.snapshot()
    assert [t.finished for t in final.tasks] == [True, True] and book.ask() is None
    assert (final.tasks[0].trials, final.tasks[1].trials, final.tasks[1].failures) == (0, 2, 1)
    assert [s.slot for s in book.scheduler.seen] == [0, 1]  # every slot has a number, empty ones too


def test_the_run_ends_on_its_time_budget_or_the_drivers_limit_and_when_the_scheduler_stops():
    now = [0.0]
    book = ledger([0, 1, 0], Budget(time_budget=10.0), clock=lambda: now[0])
    book.tell(book.ask(), [1e-3])
    now[0] = 10.0
    assert book.ask() is None and len(book.scheduler.seen) == 1  # checked before the scheduler is asked
    book = ledger([0], Budget(max_trials=100), pacing=Pacing(seconds_left=lambda snapshot: 5.0 - snapshot.trials))
    book.tell(book.ask(), [1e-3] * 5)
    assert book.ask() is None
    book = ledger([], Budget(max_trials=100))
    assert book.ask() is None and len(book.scheduler.seen) == 1


def test_under_a_time_limit_a_slot_gets_only_the_trials_that_fit():
    pace = SlotPace()
    pace.record(searching=False, fixed=1.0, trials=4, measure_seconds=4.0)  # 1 s + 1 s a trial
    now = [0.0]
    book = ledger([0, 1], Budget(time_budget=10.0), clock=lambda: now[0], pacing=Pacing(pace=pace),
                  trials_per_slot=8)
    now[0] = 6.0
    assert book.ask().n == 3  # 4 s left: 1 s fixed and 3 trials
    now[0] = 8.5
    assert book.ask() is None  # 1.5 s left: the fixed part and one trial do not fit


def test_choosing_a_finished_task_is_an_error():
    book = ledger([0, 0], Budget(max_trials=100), exhausted=[0])
    with pytest.raises(RuntimeError, match="finished task 0"):
        book.ask()


def test_recorded_slots_are_shown_to_the_scheduler_and_numbered_before_new_ones():
    book = ledger([1, 0, 1], Budget(max_trials=100), trials_per_slot=2)
    book.tell(book.recorded(0, 0, 2), [2e-3, 1e-3])  # the run chose task 0 where this scheduler says 1
    book.tell(book.recorded(3, 1, 2), [1e-3, 1e-3])
    slot = book.ask()
    assert slot == Slot(4, 1, 2, slot.decision_seconds)  # the scheduler's own third choice, numbered after 3
    assert [s.trials for s in book.scheduler.seen] == [0, 2, 4]
    assert book.decisions == 3 and book.snapshot().tasks[0].best == 1e-3


def test_failures_count_against_the_trial_budget_unless_told_not_to():
    for count, slots, valid in ((True, 2, 2), (False, 4, 4)):
        book = ledger([0, 1, 0, 1, 0], Budget(max_trials=4, count_failures=count), trials_per_slot=2)
        told = 0
        while (slot := book.ask()) is not None:
            book.tell(slot, [2e-3, INF][:slot.n])  # a failure in every slot of two
            told += 1
        failures = sum(t.failures for t in book.snapshot().tasks)
        assert (told, book.trials - failures) == (slots, valid)  # uncounted: 4 valid trials, in slots of 2, 2, 2, 1
    with pytest.raises(InputError, match="count-failures"):
        Budget(max_trials=4, count_failures="no")


def test_default_latencies_told_after_the_start_set_the_untuned_estimate_before_any_slot():
    unknown = tuple(TraceTask(t.name, t.weight, t.flops, INF) for t in TASKS)
    book = Ledger(unknown, Scripted([0]), Budget(max_trials=100), clock=lambda: 5.0)
    assert book.history == [(0.0, INF)] and book.snapshot().untuned_latency() == INF
    book.set_default_latencies([4e-3, 1e-3])
    assert book.history == [(0.0, 2 * 4e-3 + 1e-3)]
    assert [t.default_latency for t in book.snapshot().tasks] == [4e-3, 1e-3]
    book.tell(book.recorded(0, 0, 2), [3e-3, 2e-3])
    assert book.history[-1] == (5.0, 2 * 2e-3 + 1e-3)
    with pytest.raises(RuntimeError, match="before any slot"):
        book.set_default_latencies([1.0, 1.0])


@pytest.mark.parametrize("name", ["dynatune", "dynatune-egreedy", "dynatune-softmax", "expected-gain"])
def test_a_resumed_run_makes_the_uninterrupted_runs_decisions(name):
    # a run of 14 slots on a synthetic trace, its clock the trials' recorded costs; then a fresh ledger and a
    # fresh scheduler told its first 6 slots as recorded ones, on the same clock, and asked for the rest
    trace = synthetic(n_tasks=4, trials=160, seeds=1, seed=2)
    runs, budget = trace.runs[0], Budget(max_trials=14 * 8)
    fast = {"n_walkers": 8, "n_steps": 40, "burn_in": 20, "thin": 2}
    options = {"dynatune-egreedy": {"epsilon": 0.3}, "dynatune-softmax": {"temperature": 1.0}}.get(name, {})

    def start():
        now = [0.0]
        scheduler = schedulers.create_seeded(name, 7, **({} if name == "expected-gain" else fast), **options)
        return Ledger(trace.tasks, scheduler, budget, trials_per_slot=8, clock=lambda: now[0]), now, [0] * 4

    def measure(slot, now, used):
        latencies = runs[slot.task].latencies[used[slot.task]:used[slot.task] + slot.n]
        now[0] += sum(runs[slot.task].costs[used[slot.task]:used[slot.task] + slot.n])
        used[slot.task] += slot.n
        return latencies

    book, now, used = start()
    slots = []
    while (slot := book.ask()) is not None:
        book.tell(slot, measure(slot, now, used))
        slots.append(slot)
    picks = [slot.task for slot in slots]
    assert len(picks) == 14 and len(set(picks[4:])) > 1  # past the warm-up, more than one task is chosen

    resumed, now, used = start()
    for slot in slots[:6]:
        resumed.tell(resumed.recorded(slot.index, slot.task, slot.n), measure(slot, now, used))
    rest = []
    while (slot := resumed.ask()) is not None:
        resumed.tell(slot, measure(slot, now, used))
        rest.append(slot)
    assert [(s.index, s.task, s.n) for s in slots[6:]] == [(s.index, s.task, s.n) for s in rest]
    assert resumed.history == book.history and resumed.decisions == book.decisions


def trace_of_run(store, run, tasks) -> Trace:
    """The run's trials as a replay trace: each task's latencies in the order they were measured."""
    trials = store.get_trials(run)
    runs = tuple(TaskRun(tuple(t.latency for t in trials if t.task == k),
                         tuple(t.build_seconds + t.run_seconds for t in trials if t.task == k))
                 for k in range(len(tasks)))
    return Trace("tiny-mlp", tuple(TraceTask(t.name, t.weight, t.flops, t.default_latency) for t in tasks), (runs,))


@pytest.mark.tvm
def test_session_resume_and_replay_make_the_same_decisions_on_the_same_trials(tuned_store, tiny_mlp, measurer):
    from tunewise.tuning import session

    store, sessions, _ = tuned_store
    budgets = [(Budget(max_trials=20, per_task_trials=12), 6), (Budget(max_trials=6), 3)]
    for (name, (budget, per_slot)), tuned in zip((("round-robin", budgets[0]), ("random", budgets[1])), sessions,
                                                 strict=True):
        picks = [c.task for c in store.get_checkpoints(tuned.run_id)]
        trace = trace_of_run(store, tuned.run_id, store.get_tasks(tuned.run_id))
        replayed = replay(trace, schedulers.create_seeded(name, 0), seed_index=0, trials_per_slot=per_slot,
                          decision_cost=0.0, budget=Budget(max_trials=budget.max_trials,
                                                           per_task_trials=budget.per_task_trials))
        resumed = session.Session(tiny_mlp, schedulers.create_seeded(name, 0), budget, measurer, store,
                                  tuned.run_id, session.SessionParts(trials_per_slot=per_slot))
        assert list(replayed.picks) == picks
        for final in (replayed.final, resumed.snapshot()):
            assert final.trials == tuned.snapshot().trials
            for got, expected in zip(final.tasks, tuned.snapshot().tasks, strict=True):
                assert (got.trials, got.failures, got.best_history) == (expected.trials, expected.failures,
                                                                        expected.best_history)
        # the replay also finishes a task whose recorded trials are all used
        assert [t.finished for t in resumed.snapshot().tasks] == [t.finished for t in tuned.snapshot().tasks]
        assert resumed.ledger.ask() is None  # the resumed run knows its budget is spent


def test_a_run_is_spent_by_its_own_limits_as_the_budget_counts_them():
    book = ledger([0, 0, 0], Budget(max_trials=4, count_failures=False), trials_per_slot=2)
    book.tell(book.ask(), [1e-3, INF])
    book.tell(book.ask(), [INF, 2e-3])
    assert book.trials == 4 and not book.spent()  # the two failures do not count against the 4 trials
    book.tell(book.ask(), [1e-3, 1e-3])
    assert book.spent()
    timed = ledger([0, 1], Budget(time_budget=10.0), clock=lambda: 12.0, pacing=Pacing(seconds_left=lambda _: 1e9))
    assert timed.spent()
    driven = ledger([0, 1], Budget(max_trials=100), pacing=Pacing(seconds_left=lambda _: 0.0))  # a driver's limit only
    assert driven.ask() is None and not driven.spent()
