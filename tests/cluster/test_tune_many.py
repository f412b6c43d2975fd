"""Many models at once on a real Ray cluster: two nodes on loopback sharing a PostgreSQL store, more models
than measurement slots (so the models take turns and the policy suspends them), a worker killed mid-round;
bad clusters and stores in one line."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import threading
import time

import pytest

from tunewise import stores
from tunewise.cluster import MEASURE, tune_many
from tunewise.errors import ClusterLostError, InputError
from tunewise.importing import frontend
from tunewise.settings import RunSettings
from tunewise.tuning.session import Budget

pytestmark = pytest.mark.tvm
ray = pytest.importorskip("ray")

SETTINGS = RunSettings(budget=Budget(max_trials=6), trials_per_slot=3, evaluator="fixed", references=False,
                       timing_rounds=3)


def two_single_core_nodes(cluster_class):
    """A Ray cluster of two nodes on this machine, each on one core of its own (the processes a node starts
    inherit its CPU affinity), as two single-core machines would be: each node's workers tune and time with
    one thread, and the nodes do not compete for a core."""
    mine = os.sched_getaffinity(0)
    cores = sorted(mine)
    if len(cores) < 2:
        pytest.skip("needs two cores")
    try:
        os.sched_setaffinity(0, cores[:1])
        cluster = cluster_class(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {MEASURE: 1}})
        os.sched_setaffinity(0, cores[1:2])
        cluster.add_node(num_cpus=1, resources={MEASURE: 1})
    finally:
        os.sched_setaffinity(0, mine)
    return cluster


def test_three_models_take_turns_on_two_nodes_into_one_postgresql_store_and_a_killed_worker_loses_no_trial(
        tmp_path, postgres_url):
    """Two nodes of one measurement slot each, three models (the smallest, thrice: three runs) in short rounds:
    two tune at once, one waits suspended and is resumed; the first round's worker is killed once it stored a
    trial, and its round is run again from the store."""
    from ray.cluster_utils import Cluster

    url = postgres_url
    store = stores.create(url)
    statuses, plans, killed = [], [], []

    def kill_the_first_round_in_flight():
        while not killed:  # the first run's owner is the worker tuning it: killed once it stored a trial
            runs = store.get_runs()
            if runs and store.get_trials(runs[0].id, records=False) and runs[0].owner:
                killed.append(int(runs[0].owner.split()[1]))
                os.kill(killed[0], signal.SIGKILL)
            time.sleep(0.2)

    def on_round(index, plan, names, outcomes):
        plans.append(plan)
        statuses.append({run.id: run.status for run in store.get_runs()})

    frontend.load("tiny-mlp")  # into the import cache the nodes' workers read: none of them imports PyTorch
    cluster = two_single_core_nodes(Cluster)
    try:
        with pytest.raises(InputError, match="SQLite"):
            tune_many(["tiny-mlp"], cluster=cluster.address, store=f"sqlite:///{tmp_path}/x.db", settings=SETTINGS)
        killer = threading.Thread(target=kill_the_first_round_in_flight, daemon=True)
        killer.start()
        fleet = tune_many(["tiny-mlp"] * 3, cluster=cluster.address, store=url,
                          settings=dataclasses.replace(SETTINGS, budget=Budget(max_trials=9)), round_seconds=0.1,
                          output=str(tmp_path / "out"),
                          on_round=on_round)
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert killed, "no worker was killed"
    assert max(len(plan.run) for plan in plans) == 2  # one round a node
    assert fleet.suspensions >= 1 and fleet.resumptions >= 1
    assert any("suspended" in s.values() for s in statuses)
    for run, result in zip(fleet.runs, fleet.results, strict=True):
        trials = store.get_trials(run, records=False)
        assert len(trials) == 9  # the budget exactly: the killed round's slot was measured again, nothing twice
        assert len({t.candidate for t in trials}) == 9
        assert store.get_run(run).status == stores.FINISHED
        assert os.path.exists(os.path.join(result.artifact, "model.so")) and result.max_error < 1e-4
        assert result.torch_latency is None and result.onnxruntime_latency is None  # references=False
    assert [os.path.basename(r.artifact) for r in fleet.results] == ["tiny-mlp", "tiny-mlp-2", "tiny-mlp-3"]


def local_ray_process(name: str) -> int:
    """The process id of the local Ray node's system process ``name`` (``ray::DashboardAgent``): a child of its
    raylet, which shares its fate."""
    raylet = ray._private.worker._global_node.all_processes["raylet"][0].process.pid
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat, open(f"/proc/{pid}/cmdline") as cmdline:
                if int(stat.read().rsplit(")", 1)[1].split()[1]) == raylet and cmdline.read().startswith(name):
                    return int(pid)
        except OSError:
            continue
    raise AssertionError(f"no {name} under the raylet {raylet}")


@contextlib.contextmanager
def at_most(seconds: int):
    """Raise :class:`TimeoutError` in the block once it has run ``seconds`` (a hung cluster fails the test)."""

    def expired(_signum, _frame):
        raise TimeoutError(f"not done in {seconds}s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def killing_once_stored(store, more_than: int, killed: list):
    """While the block runs, a thread kills the local Ray node's ``ray::DashboardAgent`` once the store holds
    more than ``more_than`` trials, its process id appended to ``killed``."""
    done = threading.Event()

    def watch():
        while not done.wait(0.2):
            if store.count_trials() > more_than and ray.is_initialized():
                with contextlib.suppress(AssertionError, KeyError, IndexError, AttributeError):
                    pid = local_ray_process("ray::DashboardAgent")
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def test_a_fleet_keeps_its_runs_when_the_local_ray_cluster_loses_a_system_process(tmp_path):
    """A Ray system process killed mid-fleet (the raylet's dashboard agent: the raylet and its node die with
    it): with no restart left, one line names what died and the command that continues the runs, which are all
    in the store, whole slots only; the fleet so resumed loses its cluster again, starts it again, and every
    model ends with its budget exactly, nothing measured twice, nothing stored before lost."""
    url = f"sqlite:///{tmp_path}/tunewise.db"
    store = stores.create(url)
    settings = dataclasses.replace(SETTINGS, budget=Budget(max_trials=4), trials_per_slot=2)
    frontend.load("tiny-mlp")  # into the import cache the workers read: none of them imports PyTorch
    killed: list[int] = []
    try:
        with at_most(300), killing_once_stored(store, 0, killed), pytest.raises(ClusterLostError) as lost:
            tune_many(["tiny-mlp"] * 2, store=url, settings=settings, round_seconds=0.1,
                      output=str(tmp_path / "out"), restarts=0)
    finally:
        ray.shutdown()
    assert len(killed) == 1
    runs = [run.id for run in store.get_runs()]
    assert runs == [1, 2]  # both were created before the first round, though one may not have tuned yet
    assert re.fullmatch(r"the Ray cluster 'local' lost a process it needs \(\w+: [^;]+\); runs 1, 2 keep every "
                        rf"slot they stored: continue with tunewise tune-many --resume 1,2 --store {url}",
                        str(lost.value)), str(lost.value)
    before = {run: store.get_trials(run, records=False) for run in runs}
    assert all(len(trials) % 2 == 0 for trials in before.values()) and any(before.values())  # whole slots

    try:
        with at_most(300), killing_once_stored(store, store.count_trials(), killed):
            fleet = tune_many(store=url, round_seconds=0.1, resume=runs)
    finally:
        ray.shutdown()
    assert len(killed) == 2
    assert list(fleet.runs) == runs
    for run, result in zip(fleet.runs, fleet.results, strict=True):
        trials = store.get_trials(run, records=False)
        assert trials[:len(before[run])] == before[run]
        assert len(trials) == 4 and len({t.candidate for t in trials}) == 4
        assert store.get_run(run).status == stores.FINISHED
        assert result.torch_latency is None and os.path.exists(os.path.join(result.artifact, "model.so"))
    assert [os.path.basename(r.artifact) for r in fleet.results] == ["tiny-mlp", "tiny-mlp-2"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"sources": []}, "at least one model"),
    ({"sources": ["tiny-mlp"], "store": "sqlite://"}, "in-memory"),
    ({"sources": ["tiny-mlp"], "settings": RunSettings(budget=Budget())}, "budget"),
    ({"sources": ["tiny-mlp"], "cluster": "127.0.0.1:1"}, "cannot connect to the Ray cluster"),
    ({"sources": ["tiny-mlp"], "resume": [1]}, "give no models and no output folder"),
    ({"sources": [], "resume": [7]}, "no run 7 in the store"),
])
def test_bad_fleets_are_one_line_errors(kwargs, message, tmp_path):
    kwargs = {"store": f"sqlite:///{tmp_path}/s.db", "settings": SETTINGS, **kwargs}
    sources = kwargs.pop("sources")
    if kwargs.get("cluster", "local") != "local":
        kwargs["store"] = os.environ.get("TUNEWISE_TEST_POSTGRES_URL") or pytest.skip("needs a PostgreSQL URL")
    with pytest.raises(InputError, match=message) as err:
        tune_many(sources, **kwargs)
    assert "\n" not in str(err.value)
