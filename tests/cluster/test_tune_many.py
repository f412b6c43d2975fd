"""Many models at once on real Ray clusters: a local one (one measurement slot, so the models take turns and
the policy suspends them) with a worker killed mid-round, and two nodes on loopback sharing a PostgreSQL
store; bad clusters and stores in one line."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tunewise import stores
from tunewise.cluster import MEASURE, tune_many
from tunewise.errors import InputError
from tunewise.session import Budget
from tunewise.settings import RunSettings

pytestmark = pytest.mark.tvm
ray = pytest.importorskip("ray")

SETTINGS = RunSettings(budget=Budget(max_trials=6), trials_per_slot=3, evaluator="fixed")


@pytest.fixture
def local_ray():
    ray.init(num_cpus=2, resources={MEASURE: 1}, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_models_take_turns_on_one_slot_and_a_killed_worker_loses_no_trial(local_ray, tmp_path):
    url = f"sqlite:///{tmp_path}/fleet.db"
    store = stores.create(url)
    statuses, killed = [], []

    def kill_the_first_round_in_flight():
        while not killed:  # the first run's owner is the worker tuning it: killed once it stored a trial
            runs = store.get_runs()
            if runs and store.get_trials(runs[0].id, records=False) and runs[0].owner:
                killed.append(int(runs[0].owner.split()[1]))
                os.kill(killed[0], signal.SIGKILL)
            time.sleep(0.2)

    def on_round(index, plan, names, outcomes):
        statuses.append({run.model: run.status for run in store.get_runs()})

    killer = threading.Thread(target=kill_the_first_round_in_flight, daemon=True)
    killer.start()
    fleet = tune_many(["tiny-mlp", "tiny-cnn"], store=url, settings=SETTINGS, round_seconds=0.1,
                      output=str(tmp_path / "out"), compare_torch=False, on_round=on_round)
    assert killed, "no worker was killed"
    assert fleet.rounds >= 4 and fleet.suspensions >= 1 and fleet.resumptions >= 1
    assert any("suspended" in s.values() for s in statuses)
    for run, result in zip(fleet.runs, fleet.results, strict=True):
        trials = store.get_trials(run, records=False)
        assert len(trials) == 6  # the budget exactly: the killed round's slot was measured again, nothing twice
        assert len({t.candidate for t in trials}) == 6
        assert store.get_run(run).status == stores.FINISHED
        assert os.path.exists(os.path.join(result.artifact, "model.so")) and result.max_error < 1e-4
        assert result.torch_latency is None and result.onnxruntime_latency is None  # compare_torch=False
    assert [os.path.basename(r.artifact) for r in fleet.results] == ["tiny-mlp", "tiny-cnn"]


def test_two_nodes_tune_two_models_at_once_into_one_postgresql_store(tmp_path, postgres_url):
    from ray.cluster_utils import Cluster

    url = postgres_url
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {MEASURE: 1}})
    cluster.add_node(num_cpus=1, resources={MEASURE: 1})
    try:
        with pytest.raises(InputError, match="SQLite"):
            tune_many(["tiny-mlp"], cluster=cluster.address, store=f"sqlite:///{tmp_path}/x.db", settings=SETTINGS)
        rounds = []
        fleet = tune_many(["tiny-mlp", "tiny-mlp"], cluster=cluster.address, store=url,
                          settings=SETTINGS, round_seconds=600, output=str(tmp_path / "out"), compare_torch=False,
                          on_round=lambda index, plan, names, outcomes: rounds.append(plan.run))
        assert rounds == [(0, 1)]  # both in one round: one slot a node
        assert fleet.suspensions == 0
        store = stores.create(url)
        assert [store.get_run(r).status for r in fleet.runs] == [stores.FINISHED] * 2
        assert [len(store.get_trials(r, records=False)) for r in fleet.runs] == [6, 6]
        assert [os.path.basename(r.artifact) for r in fleet.results] == ["tiny-mlp", "tiny-mlp-2"]
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"sources": []}, "at least one model"),
    ({"sources": ["tiny-mlp"], "store": "sqlite://"}, "in-memory"),
    ({"sources": ["tiny-mlp"], "settings": RunSettings(budget=Budget())}, "budget"),
    ({"sources": ["tiny-mlp"], "cluster": "127.0.0.1:1"}, "cannot connect to the Ray cluster"),
])
def test_bad_fleets_are_one_line_errors(kwargs, message, tmp_path):
    kwargs = {"store": f"sqlite:///{tmp_path}/s.db", "settings": SETTINGS, **kwargs}
    sources = kwargs.pop("sources")
    if kwargs.get("cluster", "local") != "local":
        kwargs["store"] = os.environ.get("TUNEWISE_TEST_POSTGRES_URL") or pytest.skip("needs a PostgreSQL URL")
    with pytest.raises(InputError, match=message) as err:
        tune_many(sources, **kwargs)
    assert "\n" not in str(err.value)
