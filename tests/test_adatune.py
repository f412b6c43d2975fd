"""AdaTune end to end: a real Session on tiny-mlp with the adaptive evaluator and the RFEI cost model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tunewise import cost_models, evaluators, schedulers, stores
from tunewise.tuning import session

pytestmark = pytest.mark.tvm


@pytest.fixture(scope="module")
def tuned(tiny_mlp, measurer):
    store = stores.create("sqlite://")
    run_id = store.create_run(tiny_mlp.name, str(tiny_mlp.target), "round-robin", {})
    model = cost_models.create("rfei", warmup=4, seed=0)
    fixed, measurer.evaluator = measurer.evaluator, evaluators.create("adaptive", runs=20, batch_ms=5.0,
                                                                  max_batches=6)
    try:
        run = session.Session(tiny_mlp, schedulers.create("round-robin"), session.Budget(max_trials=8),
                              measurer, store, run_id, session.SessionParts(trials_per_slot=4, search_batch=4,
                                                                            cost_model=model))
        final = run.run()
    finally:
        measurer.evaluator = fixed
    return run, final, model, store, run_id


def test_every_trial_is_recorded_and_valid(tuned):
    run, final, _, store, run_id = tuned
    assert final.trials == len(run.trials) == len(store.get_trials(run_id)) == 8
    assert [t.trials for t in final.tasks] == [4, 4]  # round robin, 4 a slot
    valid = [t for t in run.trials if t.error is None]
    assert len(valid) >= 6
    for t in valid:
        assert 1 <= len(t.run_secs) <= 6 and 0 < t.latency < 1  # one sample per micro-batch
    for task in final.tasks:
        assert math.isfinite(task.best) and task.best == min(t.latency for t in valid if t.task == task.index)


def test_the_forest_ranked_the_second_slot(tuned):
    _, _, model, *_ = tuned
    # warm after the first slot's 4 trials (it ranked the second task's search), then refitted on both tasks
    assert model.forest_ is not None and len(model.forest_.forest_.estimators_) == 10
    assert [len(latencies) for _, latencies in model._data.values()] == [4, 4]
    assert model.exploration_ == 0.5  # the second task had nothing measured yet: the cap


def test_the_forest_ranks_each_tasks_fastest_candidate_above_its_slowest(tuned):
    _, _, model, *_ = tuned
    # in the task whose candidates are furthest apart (beyond timing noise), the refitted forest predicts
    # the measured fastest the higher normalised throughput
    spreads = []
    for features, latencies in model._data.values():
        fastest, slowest = int(np.argmin(latencies)), int(np.argmax(latencies))
        spreads.append((latencies[slowest] / latencies[fastest], features, fastest, slowest))
    ratio, features, fastest, slowest = max(spreads, key=lambda s: s[0])
    assert ratio > 1.05, spreads
    predicted = model.forest_.predict(np.asarray(features))
    assert predicted[fastest] > predicted[slowest], (ratio, predicted)
