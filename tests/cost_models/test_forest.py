"""The RFEI numeric core on synthetic data with a known optimum (no TVM): fixed seeds, explicit tolerances."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tunewise import cost_models
from tunewise.cost_models import ForestEI, aggregate, exploration_share
from tunewise.errors import InputError

OPTIMUM = np.array([0.7, 0.2, 0.5])


def throughput(x):
    """A smooth peak of height 1 at ``OPTIMUM``."""
    return np.exp(-np.sum((x - OPTIMUM) ** 2, axis=1) / 0.05)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = rng.random((400, 3))
    return x, throughput(x), rng.random((2000, 3))


def test_the_mean_fits_held_out_data(data):
    x, y, grid = data
    model = ForestEI(seed=0).fit(x, y)
    truth = throughput(grid)
    r2 = 1 - np.sum((model.predict(grid) - truth) ** 2) / np.sum((truth - truth.mean()) ** 2)
    assert r2 > 0.7  # measured 0.79 (0.76-0.82 over seeds 0-2)


def test_sigma_is_the_spread_of_the_trees(data):
    x, y, grid = data
    model = ForestEI(n_estimators=7, seed=0).fit(x, y)
    mean, std = model.predict(grid, return_std=True)
    per_tree = np.stack([t.predict(grid) for t in model.forest_.estimators_])
    assert len(model.forest_.estimators_) == 7
    np.testing.assert_allclose(mean, per_tree.mean(axis=0))
    np.testing.assert_allclose(std, per_tree.std(axis=0))
    assert np.all(std >= 0)
    flat = ForestEI(seed=0).fit(x, np.full(len(x), 0.5))  # every tree agrees: no uncertainty
    assert np.all(flat.predict(grid, return_std=True)[1] == 0)


def test_expected_improvement_ranks_the_optimum_region_first(data):
    x, y, grid = data
    far = np.linalg.norm(x - OPTIMUM, axis=1) > 0.25  # nothing measured near the optimum
    model = ForestEI(seed=0).fit(x[far], y[far])
    ei = model.expected_improvement(grid, best=y[far].max())
    top = grid[np.argsort(ei)[::-1][:20]]
    assert np.all(ei >= 0)
    assert np.median(np.linalg.norm(top - OPTIMUM, axis=1)) < 0.3  # measured 0.21
    # the random top 20 would sit ~0.6 away on average
    assert np.mean(np.linalg.norm(grid - OPTIMUM, axis=1)) > 0.5


def test_a_seed_fixes_the_fit(data):
    x, y, grid = data
    a, b = ForestEI(seed=3).fit(x, y), ForestEI(seed=3).fit(x, y)
    np.testing.assert_array_equal(a.predict(grid), b.predict(grid))
    assert not np.array_equal(a.predict(grid), ForestEI(seed=4).fit(x, y).predict(grid))


def test_bad_input():
    shapes = "need X of shape (n, d) and y of shape (n,) with n > 0, got"
    with pytest.raises(ValueError, match=re.escape(f"{shapes} (3, 2) and (4,)")):
        ForestEI().fit(np.zeros((3, 2)), np.zeros(4))
    with pytest.raises(ValueError, match=re.escape(f"{shapes} (0, 2) and (0,)")):
        ForestEI().fit(np.zeros((0, 2)), np.zeros(0))


def test_exploration_share():
    assert exploration_share([0.1, 0.3], best=1.0) == pytest.approx(0.2)
    assert exploration_share([0.1, 0.3], best=0.5) == pytest.approx(0.4)
    assert exploration_share([2.0], best=1.0) == 0.5  # capped
    assert exploration_share([2.0], best=1.0, cap=1.0) == 1.0
    assert exploration_share([0.0], best=1.0) == 0.0
    assert exploration_share([0.1], best=0.0) == 0.5  # nothing valid measured yet


def test_aggregate_stores():
    per_store = [np.array([[1.0, 2.0], [3.0, 0.0]]), np.zeros((0, 2)), np.array([[5.0, 1.0]])]
    rows = aggregate(per_store, 2)
    assert rows.shape == (3, 6)
    np.testing.assert_array_equal(rows[0], [4, 2, 2, 1, 3, 2])
    np.testing.assert_array_equal(rows[1], 0)
    np.testing.assert_array_equal(rows[2], [5, 1, 5, 1, 5, 1])


def test_factory_rejects_unknown_names_and_arguments():
    for name, kwargs in [("gp", {}), ("rfei", {"trees": 10}), ("xgb", {"bogus": 1}), ("rfei", {"warmup": 0}),
                         ("rfei", {"max_exploration": 2.0})]:
        with pytest.raises(InputError, match=f"cost model '{name}'"):
            cost_models.create(name, **kwargs)
