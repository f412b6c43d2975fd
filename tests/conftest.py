"""Shared fixtures: real TVM on tiny models, built once per test session."""

import pytest


@pytest.fixture(scope="session")
def host_target():
    from tunewise import target, tvm_env

    tvm_env.prepare("llvm")
    return target.resolve(None)


@pytest.fixture(scope="session")
def measurer(host_target):
    from tunewise import measure

    # the fixed evaluator with short repeats: quick, and one sample per candidate (the adaptive default is
    # tested in runners/ and test_adatune, and end to end through the CLI)
    m = measure.Measurer(host_target, measure.MeasureConfig(number=2, min_repeat_ms=10), evaluator="fixed")
    yield m
    m.close()


@pytest.fixture(scope="session")
def tiny_mlp(host_target, measurer):
    """tiny-mlp extracted with default latencies measured: two dense tasks."""
    from tunewise import frontend, tasks

    return tasks.extract(frontend.load("tiny-mlp"), host_target, measurer=measurer)



@pytest.fixture(scope="session")
def tuned_store(tiny_mlp, measurer, tmp_path_factory):
    """A SQLite store with two short real tuning runs of tiny-mlp, of different schedulers.

    Returns ``(store, [session 1, session 2], events of session 1)``: round-robin with 20 trials (at most
    12 a task, 6 a slot), then random with 6 (3 a slot).
    """
    from tunewise import schedulers, session, stores

    store = stores.create(f"sqlite:///{tmp_path_factory.mktemp('tuned')}/tunewise.db")
    events, sessions = [], []
    for name, budget, per_slot in (("round-robin", session.Budget(max_trials=20, per_task_trials=12), 6),
                                   ("random", session.Budget(max_trials=6), 3)):
        run = store.create_run(tiny_mlp.name, str(tiny_mlp.target), name, {})
        sessions.append(session.Session(tiny_mlp, schedulers.create_seeded(name, 0), budget, measurer, store, run,
                                        trials_per_slot=per_slot,
                                        listeners=[lambda e, s: events.append((e, s))] if not sessions else []))
        sessions[-1].run()
    return store, sessions, events
