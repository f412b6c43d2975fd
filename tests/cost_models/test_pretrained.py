"""The pretrained cost model: trained by bench/pretrain.py from a store's dataset, shipped per ISA class, ranking
a run's first slots and boosted further with the run's own measurements."""

import argparse
import os
import sys

import numpy as np
import pytest

from tunewise import cli, cost_models, schedulers, stores
from tunewise.cost_models import _pretrained
from tunewise.errors import InputError
from tunewise.tuning import session

pytestmark = pytest.mark.tvm

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


def _bench(name: str):
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    return __import__(name)


@pytest.fixture(scope="module")
def isa(host_target):
    from tunewise import target

    name = target.isa_class(host_target)
    if name is None:
        pytest.skip("this CPU has no ISA class pretrained models are made for")
    return name


@pytest.fixture(scope="module")
def trained(tuned_store, isa, tmp_path_factory):
    """The dataset file of the tuned store and the folder of a 4-round model trained on it, twice over."""
    store = tuned_store[0]
    folder = tmp_path_factory.mktemp("pretrained")
    [data] = _bench("dataset").export(argparse.Namespace(store=store.url, out=str(folder / "data")))
    pretrain = _bench("pretrain")
    [path] = pretrain.main([data, "--out", str(folder / "a"), "--rounds", "4"])
    [again] = pretrain.main([data, "--out", str(folder / "b"), "--rounds", "4"])
    return data, path, again


def test_a_model_trained_from_a_store_loads_and_is_the_same_each_time(trained, isa, tuned_store):
    _, path, again = trained
    assert os.path.basename(path) == f"cost-model-{isa}.json.gz"
    with open(path, "rb") as a, open(again, "rb") as b:
        assert a.read() == b.read()  # seeded, single-threaded, no timestamp
    prior = cost_models.load_pretrained(path)
    stored = sum(t.error is None for t in tuned_store[0].get_trials())
    assert prior.isa_class == isa and prior.booster.num_boosted_rounds() == 4
    assert prior.trained["trials"] == stored and prior.trained["models"] == ["tiny-mlp"]


def test_a_corrupt_or_foreign_file_is_a_one_line_error(tmp_path):
    bad = tmp_path / "cost-model-avx2.json.gz"
    bad.write_bytes(b"not a model")
    with pytest.raises(InputError, match="cannot be read") as err:
        cost_models.load_pretrained(str(bad))
    assert "\n" not in str(err.value) and "--no-pretrained" in str(err.value)


def _session(model, measurer, pretrained: bool, url: str = "sqlite://", **kwargs):
    store = stores.create(url)
    run = store.create_run(model.name, str(model.target), "round-robin", {})
    return session.Session(model, schedulers.create("round-robin"), session.Budget(max_trials=4), measurer, store,
                           run, session.SessionParts(trials_per_slot=2, share="off", pretrained=pretrained, **kwargs))


def test_without_a_model_for_the_class_or_with_the_flag_off_the_model_is_cold(trained, tiny_mlp, measurer,
                                                                             tmp_path, monkeypatch):
    monkeypatch.setattr(_pretrained, "FOLDER", str(tmp_path))  # no file for the class
    assert _session(tiny_mlp, measurer, True).prior is None
    monkeypatch.setattr(_pretrained, "FOLDER", os.path.dirname(trained[1]))
    off = _session(tiny_mlp, measurer, False)
    assert off.prior is None and off.cost_model.prior is None
    assert _session(tiny_mlp, measurer, True, cost_model="rfei").prior is None  # for the xgb model only


def test_a_run_ranks_its_first_slots_by_the_model_and_boosts_it_with_its_own_trials(trained, tiny_mlp, measurer,
                                                                                    monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(_pretrained, "FOLDER", os.path.dirname(trained[1]))
    url = f"sqlite:///{tmp_path}/tunewise.db"
    first = _session(tiny_mlp, measurer, True, url)
    first.run()
    assert first.prior is not None and first.pretrained_tasks == len(tiny_mlp.tasks)
    # tunewise show says so, as the run's artifact records it
    first.store.add_artifact(first.run_id, str(tmp_path / "out"), {"latency_s": 1e-3,
                                                                   "pretrained_tasks": first.pretrained_tasks})
    assert cli.main(["show", str(first.run_id), "--store", url]) == 0
    assert "2 of 2 tasks ranked by the pretrained cost model from their first slot" in capsys.readouterr().out
    assert all(s.context is not None for s in first._searches)  # searched (ranked), never sampled blindly
    assert first.cost_model.booster is not None  # trained on the run's trials, from the first update
    from tvm.s_tir import meta_schedule as ms

    from tunewise.tuning.search import runner_result

    search = first._searches[0]
    measured = [t for t in first.trials if t.task == 0 and t.error is None]
    opening = min(t.slot for t in measured)
    proposed = [first.database.record(t).as_measure_candidate() for t in measured if t.slot == opening]
    drawn = [c for c, _ in search.sample(16, ms.database.MemoryDatabase(), cost_models.create("xgb", seed=5))]
    # the first slot's best-ranked candidate is one the prior ranks at least as high as the design space's
    # typical candidate drawn at random (the search also takes a few at random, so not each of them is)
    prior = first.prior.predict
    features = [x.numpy() for x in ms.feature_extractor.PerStoreFeature().extract_from(search.context,
                                                                                        proposed + drawn)]
    assert np.max(prior(features[:len(proposed)])) >= np.median(prior(features[len(proposed):]))
    # the online model is seeded: the same trials give the same scores, a blend otherwise than the prior's
    twins = [cost_models.create("xgb", seed=0, num_tuning_cores=1, prior=first.prior) for _ in range(2)]
    for twin in twins:
        twin.update(search.context, proposed, [runner_result(t) for t in measured])
    scores = [twin.predict(search.context, drawn) for twin in twins]
    assert np.array_equal(scores[0], scores[1]) and twins[0].booster is not None
    assert not np.allclose(scores[0], prior(features[len(proposed):]))
