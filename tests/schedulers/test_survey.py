"""Survey tuning: epochs of one batch per task, and tasks retired after batches without improvement."""

from __future__ import annotations

import math

import pytest

from tunewise import schedulers
from tunewise.errors import InputError
from tunewise.lab.replay import TaskRun, Trace, TraceTask, replay
from tunewise.schedulers import Survey
from tunewise.tuning.ledger import Budget, Ledger
from tunewise.tuning.state import TaskView

INF = math.inf
# untuned weight * latency: "c" 6 ms, "a" 4 ms, "b" 1 ms: the epoch order is c, a, b
TASKS = (TraceTask("a", 1, 1e9, 4e-3), TraceTask("b", 1, 1e9, 1e-3), TraceTask("c", 2, 1e9, 3e-3))


def drive(scheduler, outcomes, *, trials_per_slot=4):
    """Run a ledger with ``scheduler`` until it ends; the ``i``-th slot of task ``k`` measures
    ``outcomes[k][i]`` for each trial. Returns the tasks of the slots and the ledger."""
    ledger = Ledger(TASKS, scheduler, Budget(max_trials=1000), trials_per_slot=trials_per_slot,
                    clock=lambda: 0.0)
    picks = []
    while (slot := ledger.ask()) is not None:
        ledger.tell(slot, [outcomes[slot.task][len([p for p in picks if p == slot.task])]] * slot.n)
        picks.append(slot.task)
    return picks, ledger


def test_each_epoch_gives_every_live_task_a_batch_and_tasks_retire_after_three_without_improvement():
    outcomes = {
        0: [3e-3, 2e-3, 1e-3, 1e-3, 1e-3, 1e-3],  # improves three times, then three batches without
        1: [1e-3, 1e-3, 1e-3, 1e-3],  # never beats 1 ms after its first batch
        2: [INF, INF, INF],  # every candidate fails
    }
    picks, ledger = drive(Survey(), outcomes)
    assert picks == [2, 0, 1,  2, 0, 1,  2, 0, 1,  0, 1,  0,  0]
    final = ledger.snapshot()
    assert [t.finished for t in final.tasks] == [True, True, True] and final.trials == 13 * 4
    assert [t.slots for t in final.tasks] == [6, 4, 3]


def test_patience_is_the_number_of_batches_without_improvement():
    outcomes = {0: [3e-3, 2e-3, 2e-3], 1: [1e-3, 1e-3], 2: [2e-3, 1e-3, 1e-3]}
    assert drive(Survey(patience=1), outcomes)[0] == [2, 0, 1,  2, 0, 1,  2, 0]


def test_retirement_is_read_from_the_task_alone():
    survey = Survey(patience=2)
    assert not survey.retired(TaskView(0, "t", 1, 1e9, 1e-3, best_history=(2e-3, 1e-3, 1e-3)))
    assert survey.retired(TaskView(0, "t", 1, 1e9, 1e-3, best_history=(2e-3, 1e-3, 1e-3, 1e-3)))
    assert survey.retired(TaskView(0, "t", 1, 1e9, 1e-3, best_history=(INF, INF)))
    assert not survey.retired(TaskView(0, "t", 1, 1e9, 1e-3, best_history=(INF, 5e-3)))


def test_a_resumed_run_retires_the_tasks_its_recorded_slots_retire():
    ledger = Ledger(TASKS, Survey(patience=2), Budget(max_trials=1000), trials_per_slot=2, clock=lambda: 0.0)
    for index, (task, best) in enumerate([(2, 2e-3), (0, 3e-3), (1, 1e-3), (2, 2e-3), (0, 2e-3), (1, 1e-3),
                                          (2, 2e-3)]):
        ledger.tell(ledger.recorded(index, task, 2), [best, best])
    assert [t.finished for t in ledger.snapshot().tasks] == [False, False, True]
    assert ledger.ask().task == 0


def test_a_replay_ends_when_every_task_is_retired():
    costs = (1.0,) * 40
    flat = TaskRun((2e-3,) * 40, costs)
    improving = TaskRun(tuple(2e-3 / (1 + i) for i in range(40)), costs)
    trace = Trace("t", TASKS, ((flat, improving, flat),))
    run = replay(trace, Survey(), seed_index=0, trials_per_slot=4, decision_cost=0.0)
    # the flat tasks retire after 4 batches (the first one improves on nothing measured), the other never does
    assert run.picks.count(0) == 4 and run.picks.count(2) == 4 and run.picks.count(1) == 10
    assert run.final.trials == 18 * 4 and all(t.finished for t in run.final.tasks)


def test_create_survey():
    assert schedulers.create("survey", patience=5).patience == 5
    with pytest.raises(InputError, match="patience must be an integer >= 1"):
        schedulers.create("survey", patience=0)
