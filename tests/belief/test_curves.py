"""Belief model: curve families, least squares, MCMC posterior, expected improvement, robustness.

Statistical tests use fixed seeds and explicit tolerances; MCMC runs are kept short for speed.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tunewise.belief import FAMILIES, CurveModel, expected_improvement, last_segment

LOG_POWER = FAMILIES["log-power"]
TRUE = np.array([0.6, np.log(60.0), -1.3])  # saturates at 0.6 of peak, half-way at trial 60
X = np.arange(1, 31) * 16.0
SHORT = {"n_walkers": 8, "n_steps": 200, "burn_in": 100, "thin": 5}


def truth(x):
    return LOG_POWER(np.atleast_1d(np.asarray(x, dtype=float)), TRUE)


# ---- families ---------------------------------------------------------------------------------------


def test_log_power_is_the_papers_formula():
    a, b, c = TRUE
    assert np.allclose(truth(X), a / (1 + (X / np.exp(b)) ** c), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_families_are_non_decreasing_and_vectorised_over_the_prior(name):
    family = FAMILIES[name]
    low, high = np.array(family.bounds).T
    theta = np.random.default_rng(0).uniform(low, high, size=(200, len(low)))
    x = np.geomspace(1, 1e5, 60)
    with np.errstate(all="ignore"):
        values = family(x, theta)
    assert values.shape == (200, 60)
    finite = np.all(np.isfinite(values), axis=1)
    assert finite.mean() > 0.95
    assert np.all(np.diff(values[finite], axis=1) >= -1e-12)
    assert np.allclose(family(x, theta[0]), values[0], equal_nan=True)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_starting_points_lie_inside_the_bounds(name):
    family = FAMILIES[name]
    low, high = np.array(family.bounds).T
    for start in family.start(X, truth(X)):
        assert np.all((start > low) & (start < high))


# ---- segmentation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("y", "start"),
    [
        ([0.1, 0.11, 0.2, 0.21, 0.22], 2),
        ([0.1, 0.12, 0.14, 0.16], 0),  # each step < 20 %
        ([0.1, 0.2, 0.21, 0.3, 0.31], 3),  # the last break counts
        ([0.0, 0.0, 0.1, 0.11], 2),  # any rise from zero is a break
        ([0.3], 0),
        ([], 0),
    ],
)
def test_last_segment(y, start):
    assert last_segment(np.array(y)) == start


def test_last_segment_threshold_is_strict_and_configurable():
    assert last_segment(np.array([0.1, 0.12])) == 0  # exactly 20 %: no break
    assert last_segment(np.array([0.1, 0.12]), jump=0.1) == 1


def test_fit_uses_only_the_last_segment():
    low = truth(X[:15])
    high = 1.5 * truth(X[15:])  # a change point: the curve jumps by 50 % at trial 256
    model = CurveModel(**SHORT, seed=0).fit(X, np.r_[low, high])
    assert model.segment_start_ == 15
    # One curve over both segments would undershoot the new level; the segment fit follows it.
    assert model.predict([X[-1]])[0][0] == pytest.approx(high[-1], rel=0.01)
    whole = CurveModel(**SHORT, jump=None, seed=0).fit(X, np.r_[low, high])
    assert whole.segment_start_ == 0


# ---- maximum likelihood and posterior ---------------------------------------------------------------


def test_least_squares_recovers_noise_free_parameters():
    model = CurveModel(**SHORT, jump=None, seed=0).fit(X, truth(X), horizon=640.0)
    assert np.allclose(model.ml_params_, TRUE, rtol=1e-3)
    mean, std = model.predict([1000.0])
    assert mean[0] == pytest.approx(truth(1000.0)[0], rel=1e-3)
    assert std[0] < 2e-3


@pytest.mark.parametrize("name", ["pow2", "pow4", "loglinear"])
def test_other_families_recover_their_own_curves(name):
    family = FAMILIES[name]
    low, high = np.array(family.bounds).T
    true = {"pow2": [0.1, 0.25], "pow4": [0.6, 0.05, 1.0, 1.5], "loglinear": [0.05, 0.1]}[name]
    y = family(X, np.array(true))
    model = CurveModel(name, n_walkers=10, n_steps=200, burn_in=100, thin=5, jump=None, seed=0).fit(X, y)
    assert model.predict([600.0])[0][0] == pytest.approx(family(np.array([600.0]), np.array(true))[0], rel=0.01)


@pytest.mark.parametrize("seed", range(4))
def test_posterior_predictive_covers_the_true_curve(seed):
    y = truth(X) + 0.005 * np.random.default_rng(seed).standard_normal(X.size)
    horizon = 800.0
    model = CurveModel(**SHORT, jump=None, seed=seed).fit(X, y, horizon=horizon)
    mean, std = model.predict([horizon])
    assert abs(mean[0] - truth(horizon)[0]) < 0.01
    assert abs(mean[0] - truth(horizon)[0]) < 3 * std[0]
    assert 1e-4 < std[0] < 0.02


def test_uncertainty_grows_with_the_extrapolation_distance():
    y = truth(X) + 0.005 * np.random.default_rng(0).standard_normal(X.size)
    _, std = CurveModel(**SHORT, jump=None, seed=0).fit(X, y).predict([500.0, 2000.0, 20000.0])
    assert std[0] < std[1] < std[2]


def test_every_sample_respects_the_horizon_constraint():
    y = np.maximum.accumulate(truth(X) + 0.01 * np.random.default_rng(1).standard_normal(X.size))
    model = CurveModel(**SHORT, seed=0).fit(X, y, horizon=640.0)
    assert model.samples_ is not None
    assert np.all(LOG_POWER(np.array([640.0]), model.samples_[:, :-1]) >= y.max())
    assert model.predict([640.0])[0][0] >= y.max()


def test_posterior_shape_follows_the_arguments():
    model = CurveModel(n_walkers=10, n_steps=120, burn_in=20, thin=10, seed=0).fit(X, truth(X))
    assert model.samples_.shape == (10 * 100 // 10, 4)  # 3 curve parameters + log sigma


def test_fits_are_reproducible_and_do_not_touch_the_global_rng():
    y = truth(X) + 0.005 * np.random.default_rng(0).standard_normal(X.size)
    state = np.random.get_state()
    a = CurveModel(**SHORT, seed=5).fit(X, y).samples_
    b = CurveModel(**SHORT, seed=5).fit(X, y).samples_
    c = CurveModel(**SHORT, seed=6).fit(X, y).samples_
    after = np.random.get_state()
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert state[0] == after[0] and np.array_equal(state[1], after[1]) and state[2:] == after[2:]


# ---- expected improvement ---------------------------------------------------------------------------


def test_ei_without_uncertainty_is_the_plain_gain():
    assert np.allclose(expected_improvement([0.5, 0.1], [0.0, 0.0], 0.2), [0.3, 0.0])


def test_ei_vanishes_far_below_the_best():
    assert expected_improvement(0.1, 1e-3, 0.5) == 0.0
    assert expected_improvement(0.49, 1e-3, 0.5) < 1e-12


def test_ei_is_monotone_in_mean_and_std():
    mean = np.linspace(0.0, 1.0, 101)
    assert np.all(np.diff(expected_improvement(mean, 0.1, 0.5)) > 0)
    std = np.linspace(1e-3, 1.0, 101)
    assert np.all(np.diff(expected_improvement(0.4, std, 0.5)) > 0)


def test_ei_matches_monte_carlo():
    rng = np.random.default_rng(0)
    for mean, std in [(0.4, 0.1), (0.5, 0.05), (0.7, 0.2)]:
        y = rng.normal(mean, std, 400_000)
        mc = np.maximum(y - 0.5, 0).mean()
        assert expected_improvement(mean, std, 0.5) == pytest.approx(mc, rel=0.02, abs=1e-4)


def test_model_expected_improvement_uses_its_prediction():
    model = CurveModel(**SHORT, jump=None, seed=0).fit(X, truth(X))
    mean, std = model.predict([800.0])
    assert model.expected_improvement([800.0], 0.5) == pytest.approx(expected_improvement(mean, std, 0.5))


# ---- robustness -------------------------------------------------------------------------------------

CASES = {
    "empty": ([], []),
    "one": ([16.0], [0.3]),
    "two": ([16.0, 32.0], [0.3, 0.31]),
    "flat": (X, np.full(X.size, 0.3)),
    "zeros": (X, np.zeros(X.size)),
    "with-nan": (X, np.r_[np.full(10, np.nan), np.linspace(0.1, 0.2, 20)]),
    "at-peak": (X, np.ones(X.size)),
    "tiny": (X, np.linspace(1e-5, 2e-5, X.size)),
    "jump-at-end": (X, np.r_[np.linspace(0.1, 0.12, X.size - 1), 0.3]),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_beliefs_are_always_finite(name, case):
    x, y = CASES[case]
    walkers = 2 * (len(FAMILIES[name].params) + 1)
    model = CurveModel(name, n_walkers=walkers, n_steps=60, burn_in=30, thin=5, seed=0).fit(x, y)
    mean, std = model.predict([1.0, 500.0, 1e6])
    ei = model.expected_improvement([500.0], model.best_)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(np.isfinite(ei))
    assert np.all(std >= 0) and np.all(ei >= 0)


def test_few_points_give_a_flat_belief():
    mean, std = CurveModel().fit([], []).predict([100.0])
    assert (mean[0], std[0]) == (0.0, 0.5)
    mean, std = CurveModel().fit([16.0, 32.0], [0.2, 0.3]).predict([100.0, 1000.0])
    assert np.allclose(mean, 0.3) and np.allclose(std, 0.3)
    mean, std = CurveModel().fit([16.0], [0.9]).predict([100.0])
    assert (mean[0], std[0]) == (0.9, pytest.approx(0.1))


def test_flat_curve_predicts_its_level():
    mean, std = CurveModel(**SHORT, seed=0).fit(X, np.full(X.size, 0.3)).predict([640.0])
    assert mean[0] == pytest.approx(0.3, abs=2e-3)
    assert std[0] < 2e-3


# ---- input checks -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"family": "cubic"}, "unknown curve family 'cubic'; valid: "),
        # log-power has 4 dimensions: at least 8 walkers
        ({"n_walkers": 6}, "n_walkers must be an integer >= 8 for 'log-power', got 6"),
        ({"n_steps": 100, "burn_in": 100}, "need integers 0 <= burn_in < n_steps, got 100 and 100"),
        ({"thin": 0}, "thin must be an integer >= 1, got 0"),
        ({"jump": 0.0}, "jump must be > 0 or None, got 0.0"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        CurveModel(**kwargs)


def test_bad_data_is_rejected():
    with pytest.raises(ValueError, match="same length"):
        CurveModel().fit([1.0, 2.0], [0.1])
    with pytest.raises(ValueError, match="> 0"):
        CurveModel().fit([0.0, 1.0], [0.1, 0.2])
    with pytest.raises(RuntimeError, match=re.escape("CurveModel.predict() before fit()")):
        CurveModel().predict([1.0])


def test_repr_shows_the_arguments():
    assert repr(CurveModel("pow2", seed=3)).startswith("CurveModel(family='pow2', n_walkers=32")
