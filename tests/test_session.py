"""A real tuning run of tiny-mlp's two dense tasks: records, budgets and the latency curve."""

import json
import math

import pytest

from tunewise import schedulers, session
from tunewise.errors import InputError

pytestmark = pytest.mark.tvm


@pytest.fixture(scope="module")
def tuned(tiny_mlp, measurer, tmp_path_factory):
    from tvm.s_tir import meta_schedule as ms

    work = tmp_path_factory.mktemp("records")
    database = ms.database.JSONDatabase(work_dir=str(work))
    events = []
    with open(work / "trials.jsonl", "w") as log:
        run = session.Session(tiny_mlp, schedulers.create("round-robin"),
                              session.Budget(max_trials=20, per_task_trials=12), measurer, database,
                              trials_per_slot=6, trial_log=log, listeners=[lambda e, s: events.append((e, s))])
        final = run.run()
    return run, final, database, events, work


def test_budgets_are_respected(tuned):
    run, final, *_ = tuned
    assert final.trials == len(run.trials) == 20
    assert all(t.trials <= 12 for t in final.tasks)
    assert [t.trials for t in final.tasks] == [12, 8]  # round robin, 6 a slot, task 0 capped at 12
    assert final.tasks[0].finished and not final.tasks[1].finished


def test_every_trial_is_recorded_in_the_log_and_the_database(tuned, tiny_mlp):
    run, final, database, _, work = tuned
    lines = [json.loads(line) for line in (work / "trials.jsonl").read_text().splitlines()]
    assert len(lines) == 20
    assert {line["task_name"] for line in lines} == {t.name for t in tiny_mlp.tasks}
    for line in lines:
        assert (line["error"] is None) == bool(line["run_secs"])
        assert line["build_seconds"] >= 0 and line["run_seconds"] > 0
        assert isinstance(line["record"], list)  # MetaSchedule's JSON of the tuning record
    records = database.get_all_tuning_records()
    assert len(records) == 20
    best = [min(t.latency for t in run.trials if t.task == k) for k in range(2)]
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
    from tvm.s_tir import meta_schedule as ms

    run = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(time_budget=1e-3),
                          measurer, ms.database.MemoryDatabase(), trials_per_slot=3)
    assert run.run().trials == 3  # the budget is checked between slots: the first slot completes
    run = session.Session(tiny_mlp, schedulers.create("sequential"),
                          session.Budget(max_trials=40, patience=1), measurer, ms.database.MemoryDatabase(),
                          trials_per_slot=4)
    final = run.run()
    # patience 1: a task is finished by its first slot that does not improve on its best
    assert all(t.finished for t in final.tasks) and final.trials < 40


@pytest.mark.parametrize("kwargs", [{}, {"max_trials": 0}, {"time_budget": -1}, {"per_task_trials": 1.5e300 * 1e10},
                                    {"patience": True}])
def test_bad_budgets(kwargs):
    with pytest.raises(InputError):
        session.Budget(**kwargs)
