"""The store conformance suite, run on every backend (see conftest): the contract of ``stores.Store``."""

import json
import math
import multiprocessing
import re
import time

import pytest
import sqlalchemy.exc

from tunewise import stores
from tunewise.errors import InputError, RunBusyError, StoreError
from tunewise.stores import Checkpoint, ModelLatency, StoredTask, StoredTrial


def record(latencies=(1e-3,), instructions=(("GetSBlock", [], ["root", "main"], ["b0"]),), target=None) -> str:
    """MetaSchedule's record JSON shape: [[instructions, decisions], run_secs, target, args_info]."""
    return json.dumps([[[list(i) for i in instructions], []], list(latencies) or None, target, None])


def trial(workload, latency=1e-3, *, task=0, slot=0, target="cpu", error=None, instructions=None):
    run_secs = () if error else (latency, latency)
    kwargs = {} if instructions is None else {"instructions": instructions}
    return StoredTrial(workload, record(run_secs, **kwargs), run_secs, error, "boom" if error else "", task, slot,
                       target, f"{slot:08x}{task:08x}", 0.5, 0.25, 1.0e9)


def equal_to(text):
    return lambda other: other == text


def test_runs_round_trip(store):
    first = store.create_run("tiny-mlp", '{"kind": "llvm"}', "gradient", {"budget": {"max_trials": 8}})
    second = store.create_run("/data/records", "cpu", "import", {}, status=stores.IMPORTED)
    run = store.get_run(first)
    assert (run.model, run.target, run.scheduler, run.settings, run.status) == (
        "tiny-mlp", '{"kind": "llvm"}', "gradient", {"budget": {"max_trials": 8}}, stores.RUNNING)
    assert run.created <= run.updated
    assert [r.id for r in store.get_runs()] == [first, second]
    store.set_status(first, stores.FINISHED)
    assert store.get_run(first).status == stores.FINISHED and store.get_run(second).status == stores.IMPORTED
    for call in (lambda: store.get_run(999), lambda: store.set_status(999, stores.FAILED)):
        with pytest.raises(InputError, match="no run 999"):
            call()


def test_update_settings_sets_the_given_keys(store):
    run = store.create_run("tiny-mlp", '{"kind": "llvm"}', "gradient", {"output": "/a", "seed": 0})
    store.update_settings(run, {"output": "/b"})
    assert store.get_run(run).settings == {"output": "/b", "seed": 0}
    with pytest.raises(InputError, match="no run 999"):
        store.update_settings(999, {"output": "/b"})


def test_workloads_are_identified_by_hash_then_equality(store):
    a = store.commit_workload("00000000000000aa", "A", equal_to("A"))
    assert store.commit_workload("00000000000000aa", "A", equal_to("A")) == a
    b = store.commit_workload("00000000000000aa", "B", equal_to("B"))  # a hash collision: a new workload
    c = store.commit_workload("ffffffffffffffff", "C", equal_to("C"))
    assert len({a, b, c}) == 3
    assert store.get_workloads("00000000000000aa") == [(a, "A"), (b, "B")]
    assert store.get_workloads("0000000000000000") == []
    assert store.get_workload(c) == ("ffffffffffffffff", "C")


def test_tasks_trials_and_checkpoints_round_trip(store):
    run = store.create_run("m", "cpu", "round-robin", {})
    w = store.commit_workload("0000000000000001", "W", equal_to("W"))
    tasks = [StoredTask(0, "dense", w, 2, 1e6, 1e-3), StoredTask(1, "relu", w, 1, 0.0, math.inf)]
    store.add_tasks(run, tasks)
    assert store.get_tasks(run) == tasks
    slot0 = [trial(w, 2e-3), trial(w, error="build")]
    slot1 = [trial(w, 1e-3, task=1, slot=1)]
    store.add_trials(run, slot0, Checkpoint(0, 0, 2, 1.5, 1.5, 3e-3))
    store.add_trials(run, slot1, Checkpoint(1, 1, 1, 2.5, 1.0, math.inf))
    store.add_trials(run, [], Checkpoint(2, 0, 0, 2.6, 0.1, 3e-3))  # an exhausted task: no trials
    assert store.get_trials(run) == slot0 + slot1
    light = store.get_trials(run, records=False)
    assert [t.record for t in light] == [None] * 3
    assert [t.run_secs for t in light] == [t.run_secs for t in slot0 + slot1]
    assert store.get_trials(run)[1].latency == math.inf and store.get_trials(run)[0].latency == 2e-3
    assert store.get_checkpoints(run) == [Checkpoint(0, 0, 2, 1.5, 1.5, 3e-3), Checkpoint(1, 1, 1, 2.5, 1.0, math.inf),
                                          Checkpoint(2, 0, 0, 2.6, 0.1, 3e-3)]
    assert store.count_trials() == 3
    other = store.create_run("m", "cpu", "random", {})
    store.add_trials(other, [trial(w)])
    assert store.get_trials() == [*slot0, *slot1, trial(w)] and store.get_trials(other) == [trial(w)]


def test_energy_and_model_latencies_round_trip(store):
    run = store.create_run("m", "cpu", "survey", {})
    w = store.commit_workload("0000000000000001", "W", equal_to("W"))
    store.add_tasks(run, [StoredTask(0, "dense", w, 1, 1e6, 1e-3)])
    store.add_trials(run, [trial(w, 2e-3)], Checkpoint(0, 0, 1, 1.5, 1.5, 2e-3, joules=30.5,
                                                       phase_joules=(10.0, 12.5, 8.0)))
    store.add_trials(run, [trial(w, 1e-3, slot=1)], Checkpoint(1, 0, 1, 2.5, 1.0, 1e-3))
    points = [ModelLatency(2.5, 2, 1.2e-3, 8.0, 90.0, timed=1.2e-3),
              ModelLatency(5.0, 2, 1.1e-3, 8.0, 90.0, timed=1.5e-3, to_previous=0.92),
              ModelLatency(9.0, 2, math.inf, 3.0, None, "output 0 differs")]
    for point in points:
        store.add_model_latency(run, point)
    assert [c.joules for c in store.get_checkpoints(run)] == [30.5, None]
    assert [c.phase_joules for c in store.get_checkpoints(run)] == [(10.0, 12.5, 8.0), None]
    assert store.get_model_latencies(run) == points
    assert store.get_model_latencies(store.create_run("m", "cpu", "survey", {})) == []


def test_a_checkpoint_keeps_its_forecast(store):
    from tunewise.forecast import END_LEVELS, Forecast

    run = store.create_run("m", "cpu", "dynatune", {})
    w = store.commit_workload("0000000000000001", "W", equal_to("W"))
    forecast = Forecast(0, 1.5, (1.5, 9.0), (2e-3, 1e-3), (2e-3, 1.2e-3), (2e-3, 1.5e-3),
                        tuple(1e-3 + 1e-3 * q for q in END_LEVELS), untried=1, goal=1.1e-3)
    store.add_trials(run, [trial(w, 2e-3)], Checkpoint(0, 0, 1, 1.5, 1.5, 2e-3, forecast=forecast))
    store.add_trials(run, [trial(w, 1e-3, slot=1)], Checkpoint(1, 0, 1, 2.5, 1.0, 1e-3))
    assert [c.forecast for c in store.get_checkpoints(run)] == [forecast, None]


def _old_store(url: str, revision: str, *rows: str) -> None:
    """Makes the store at ``url`` one of schema ``revision`` holding ``rows`` (SQL inserts)."""
    import sqlalchemy
    from alembic import command

    from tunewise.stores import _sqlalchemy

    engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        command.upgrade(_sqlalchemy.alembic_config(conn), revision)
        for row in rows:
            conn.exec_driver_sql(row)
    engine.dispose()


def test_a_store_of_the_third_schema_upgrades_and_keeps_its_checkpoints(store_url):
    _old_store(store_url, "0003",
               "INSERT INTO runs (model, target, scheduler, settings, status, created, updated) "
               "VALUES ('m', 'cpu', 'random', '{}', 'tuned', 1.0, 2.0)",
               "INSERT INTO checkpoints (run_id, slot, task_index, trials, elapsed, seconds, latency) "
               "VALUES (1, 0, 0, 16, 3.0, 3.0, 0.002)")
    store = stores.create(store_url)
    assert store.get_checkpoints(1) == [Checkpoint(0, 0, 16, 3.0, 3.0, 2e-3)]
    store.close()


def test_a_store_of_the_fourth_schema_upgrades_and_keeps_its_model_latencies(store_url):
    _old_store(store_url, "0004",
               "INSERT INTO runs (model, target, scheduler, settings, status, created, updated) "
               "VALUES ('m', 'cpu', 'random', '{}', 'tuned', 1.0, 2.0)",
               "INSERT INTO model_latencies (run_id, elapsed, trials, latency, seconds, message) "
               "VALUES (1, 360.0, 400, 0.012, 20.0, '')")
    store = stores.create(store_url)
    assert store.get_model_latencies(1) == [ModelLatency(360.0, 400, 0.012, 20.0)]  # not recorded: None
    store.close()


def test_a_trial_keeps_its_origin_and_a_store_of_the_fifth_schema_reads_its_trials_as_the_runs_own(store,
                                                                                                     tmp_path):
    import dataclasses

    run = store.create_run("m", "cpu", "random", {})
    w = store.commit_workload("00000000000000aa", "A", equal_to("A"))
    given = dataclasses.replace(trial(w, 1e-3), origin=stores.FROM_BASE)
    store.add_trials(run, [given, trial(w, 2e-3, slot=1)])
    assert [t.origin for t in store.get_trials(run)] == [stores.FROM_BASE, None]
    assert store.get_trials(run, records=False)[0].origin == stores.FROM_BASE
    url = f"sqlite:///{tmp_path}/old.db"
    _old_store(url, "0005",
               "INSERT INTO runs (model, target, scheduler, settings, status, created, updated) "
               "VALUES ('m', 'cpu', 'random', '{}', 'tuned', 1.0, 2.0)",
               "INSERT INTO workloads (shash, mod) VALUES ('00000000000000aa', 'A')",
               "INSERT INTO trials (run_id, task_index, slot, workload_id, target, record, run_secs, latency, "
               "message, build_seconds, run_seconds, timestamp) "
               "VALUES (1, 0, 0, 1, 'cpu', '[]', '[0.001]', 0.001, '', 0.5, 0.25, 3.0)")
    old = stores.create(url)
    assert [t.origin for t in old.get_trials(1)] == [None]
    old.close()


def test_a_slot_is_committed_whole_or_not_at_all(store):
    run = store.create_run("m", "cpu", "random", {})
    w = store.commit_workload("0000000000000001", "W", equal_to("W"))
    # the second trial's workload is missing: the backend's foreign key refuses it
    with pytest.raises(sqlalchemy.exc.IntegrityError, match="(?i)foreign key constraint"):
        store.add_trials(run, [trial(w), trial(w + 1000)], Checkpoint(0, 0, 2, 1.0, 1.0, 1e-3))
    assert store.get_trials(run) == [] and store.get_checkpoints(run) == [] and store.count_trials() == 0


def test_top_trials_rank_as_metaschedule_does(store):
    run = store.create_run("m", "cpu", "random", {})
    w, v = (store.commit_workload(f"000000000000000{i}", str(i), equal_to(str(i))) for i in (1, 2))
    store.add_trials(run, [
        trial(w, 3e-3), trial(w, 1e-3), trial(w, error="run"), trial(w, 2e-3, target="gpu"), trial(v, 1e-4),
        trial(w, 1e-5, instructions=[]),  # empty trace: MetaSchedule ignores it
        trial(w, 1e-5, instructions=[("EnterPostproc", [], [], [])]),  # only post-processing: ignored too
        StoredTrial(w, record([1e10]), (1e10,), target="cpu"),  # MetaSchedule's stub for "not measured"
        trial(w, 1e-3),  # a tie: the earlier one first
    ])
    top = store.top_trials(w, 10)
    assert [t.latency for t in top] == [1e-3, 1e-3, 2e-3, 3e-3]
    assert top[0] == store.get_trials(run)[1]
    assert [t.latency for t in store.top_trials(w, 10, "cpu")] == [1e-3, 1e-3, 3e-3]
    assert [t.latency for t in store.top_trials(w, 2, "cpu")] == [1e-3, 1e-3]
    assert store.top_trials(w, 10, "tpu") == [] and [t.latency for t in store.top_trials(v, 10)] == [1e-4]
    u = store.commit_workload("0000000000000003", "3", equal_to("3"))
    store.add_trials(run, [trial(u, error="run"), trial(u, 1e-5, instructions=[])])  # nothing ranked
    assert store.ranked_workloads() == [w, v] and store.ranked_workloads("gpu") == [w]
    assert store.ranked_workloads("tpu") == []


def test_ranking_latency():
    assert stores.ranking_latency(record([1e-3, 3e-3]), (1e-3, 3e-3)) == pytest.approx(2e-3)
    assert stores.ranking_latency(record([1e10, 1e-3]), (1e10, 1e-3)) == pytest.approx((1e10 + 1e-3) / 2)
    assert stores.ranking_latency(record([]), ()) is None
    assert stores.ranking_latency(record([1e-3], instructions=[]), (1e-3,)) is None


def test_artifacts(store):
    run = store.create_run("m", "cpu", "gradient", {})
    store.add_artifact(run, "/out/m", {"latency_s": 1e-3, "inputs": [{"shape": [1, 64]}]})
    [artifact] = store.get_artifacts(run)
    assert artifact.path == "/out/m" and artifact.metadata["inputs"] == [{"shape": [1, 64]}] and artifact.created > 0


def test_what_is_committed_is_seen_by_every_other_handle(store, store_url):
    run = store.create_run("m", "cpu", "gradient", {"seed": 3})
    w = store.commit_workload("0000000000000001", "W", equal_to("W"))
    store.add_trials(run, [trial(w)], Checkpoint(0, 0, 1, 1.0, 1.0, 1e-3))
    other = stores.create(store_url)
    assert other.get_run(run).settings == {"seed": 3} and other.get_trials(run) == [trial(w)]
    assert other.commit_workload("0000000000000001", "W", equal_to("W")) == w
    other.close()


def test_the_migrated_schema_is_the_declared_one(store):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from tunewise.stores._schema import METADATA

    with store._engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), METADATA) == []


def test_bad_urls_are_one_line_errors(tmp_path):
    with pytest.raises(InputError, match="bad store URL"):
        stores.create("not a url")
    with pytest.raises(InputError, match="no store at"):
        stores.create(f"sqlite:///{tmp_path}/missing.db", must_exist=True)
    with pytest.raises(InputError, match="four slashes"):
        stores.create("sqlite:///no/such/folder/tunewise.db")
    with pytest.raises(InputError, match="cannot open the store"):
        stores.create("postgresql+psycopg://nobody@127.0.0.1:1/none")
    with pytest.raises(InputError, match=r"^store URL 'foo://bar/baz' has the scheme foo:, which tunewise does not "
                                         r"take: give sqlite:///PATH or postgresql\+psycopg://"):
        stores.create("foo://bar/baz")
    with pytest.raises(InputError, match="needs a database driver that is not installed"):
        stores.create("postgresql+nodriver://nobody@127.0.0.1/none")


def _writer(url: str, name: str, slots: int, per_slot: int, start, queue) -> None:
    """One tuner's writes, as the session makes them: a run, shared workloads, a slot of trials at a time."""
    store = stores.create(url)
    start.wait()  # both writers begin together, so that they race for the same workloads
    run = store.create_run(name, "cpu", "random", {})
    workloads = [store.commit_workload(f"{k:016x}", f"W{k}", equal_to(f"W{k}")) for k in range(3)]
    store.add_tasks(run, [StoredTask(k, f"t{k}", w, 1, 1e6, 1e-3) for k, w in enumerate(workloads)])
    for slot in range(slots):
        k = slot % 3
        store.add_trials(run, [trial(workloads[k], (slot + 1) * 1e-4, task=k, slot=slot) for _ in range(per_slot)],
                         Checkpoint(slot, k, per_slot, slot + 1.0, 1.0, 1e-3))
    store.set_status(run, stores.TUNED)
    queue.put((run, workloads))


def test_two_processes_writing_one_store_lose_nothing(store, store_url):
    context = multiprocessing.get_context("spawn")
    queue, start = context.Queue(), context.Barrier(2)
    writers = [context.Process(target=_writer, args=(store_url, name, 30, 4, start, queue)) for name in ("a", "b")]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=120)
    assert [w.exitcode for w in writers] == [0, 0]
    (run_a, workloads_a), (run_b, workloads_b) = queue.get(), queue.get()
    assert workloads_a == workloads_b  # the shared workloads were stored once
    assert [len(store.get_workloads(f"{k:016x}")) for k in range(3)] == [1, 1, 1]
    assert store.count_trials() == 2 * 30 * 4
    for run in (run_a, run_b):
        assert store.get_run(run).status == stores.TUNED
        assert [c.slot for c in store.get_checkpoints(run)] == list(range(30))
        assert [t.slot for t in store.get_trials(run)] == [s for s in range(30) for _ in range(4)]


def test_a_run_has_one_owner_at_a_time(store):
    run = store.create_run("m", "cpu", "random", {}, owner="a")
    w = store.commit_workload("0000000000000001", "W", equal_to("W"))
    assert (store.get_run(run).owner, store.get_run(run).state()) == ("a", stores.RUNNING)
    with pytest.raises(RunBusyError, match=f"run {run} is being tuned by another process"):
        store.claim_run(run, "b")
    store.claim_run(run, "a")  # its own run
    with pytest.raises(RunBusyError, match="taken over"):  # only the owner records slots
        store.add_trials(run, [trial(w)], Checkpoint(0, 0, 1, 1.0, 1.0, 1e-3), owner="b")
    assert store.get_trials(run) == [] and store.get_checkpoints(run) == []
    store.add_trials(run, [trial(w)], Checkpoint(0, 0, 1, 1.0, 1.0, 1e-3), owner="a")
    assert store.beat(run, "a") and not store.beat(run, "b")
    time.sleep(0.05)
    store.claim_run(run, "b", stale_after=0.01)  # a's heartbeat is stale: b takes the run over
    assert store.get_run(run).owner == "b" and not store.beat(run, "a")
    store.release_run(run, "a")  # a owns it no more: nothing changes
    assert store.get_run(run).owner == "b"
    store.release_run(run, "b")
    store.claim_run(run, "c")
    with pytest.raises(RunBusyError, match=re.escape(f"run {run} is being tuned by another process (c, alive")):
        store.claim_run(run, "d", gone="b")  # b is gone, but c owns the run
    store.claim_run(run, "d", gone="c")  # c is known to be gone
    assert store.get_run(run).owner == "d"
    with pytest.raises(InputError, match="no run 999"):
        store.claim_run(999, "c")


def test_a_running_run_without_a_live_owner_is_dead(store):
    run = store.create_run("m", "cpu", "random", {}, owner="a")
    beat = store.get_run(run).heartbeat
    assert store.get_run(run).state(now=beat + stores.HEARTBEAT_STALE / 2) == stores.RUNNING
    assert store.get_run(run).state(now=beat + stores.HEARTBEAT_STALE + 1) == stores.DEAD
    store.release_run(run, "a")  # a running run nobody owns
    assert store.get_run(run).state() == stores.DEAD
    store.set_status(run, stores.INTERRUPTED)
    assert store.get_run(run).state() == stores.INTERRUPTED


def _claimer(url: str, run: int, name: str, start, queue) -> None:
    store = stores.create(url)
    start.wait()
    try:
        store.claim_run(run, name)
        queue.put(name)
    except RunBusyError:
        queue.put(None)


def test_of_two_processes_claiming_a_run_one_wins(store, store_url):
    run = store.create_run("m", "cpu", "random", {})
    context = multiprocessing.get_context("spawn")
    queue, start = context.Queue(), context.Barrier(2)
    claimers = [context.Process(target=_claimer, args=(store_url, run, name, start, queue)) for name in ("a", "b")]
    for c in claimers:
        c.start()
    for c in claimers:
        c.join(timeout=120)
    assert [c.exitcode for c in claimers] == [0, 0]
    winners = [w for w in (queue.get(), queue.get()) if w is not None]
    assert len(winners) == 1 and store.get_run(run).owner == winners[0]


def test_a_store_of_the_first_schema_upgrades(store_url):
    _old_store(store_url, "0001", "INSERT INTO runs (model, target, scheduler, settings, status, created, updated) "
                                  "VALUES ('m', 'cpu', 'random', '{}', 'running', 1.0, 2.0)")
    store = stores.create(store_url)
    [run] = store.get_runs()
    assert (run.model, run.owner, run.heartbeat, run.state()) == ("m", None, None, stores.DEAD)
    store.claim_run(run.id, "a")
    assert store.get_run(run.id).owner == "a"
    store.close()


def test_a_read_only_store_is_never_written(store_url, store):
    run = store.create_run("m", "cpu", "random", {})
    reader = stores.create(store_url, read_only=True)
    assert reader.get_run(run).model == "m"
    with pytest.raises(Exception, match="read-only|readonly"):
        reader.create_run("n", "cpu", "random", {})
    reader.close()


@pytest.mark.parametrize("content", [b"", b"SQLite format 3\x00" + bytes(range(256)) * 8, bytes(range(256)) * 16])
def test_a_file_that_is_no_store_is_refused_without_writing(tmp_path, content):
    path = tmp_path / "tunewise.db"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="tunewise.db"):
        stores.create(f"sqlite:///{path}", read_only=True)
    assert path.read_bytes() == content
    if content:  # an empty file is a new store to a command that writes
        with pytest.raises(StoreError, match="tunewise.db"):
            stores.create(f"sqlite:///{path}")


def test_another_programs_database_is_refused(tmp_path):
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER)")
    for read_only in (True, False):
        with pytest.raises(StoreError, match="not a tunewise store"):
            stores.create(f"sqlite:///{path}", read_only=read_only)
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["accounts"]


def test_a_truncated_store_is_a_one_line_error(tmp_path):
    path = tmp_path / "tunewise.db"
    store = stores.create(f"sqlite:///{path}")
    run = store.create_run("m", "cpu", "random", {"pad": "x" * 100_000})
    store.close()
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(StoreError, match="malformed|not a database"):
        stores.create(f"sqlite:///{path}", read_only=True).get_run(run)
