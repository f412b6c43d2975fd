"""The affine-invariant ensemble sampler behind the curve beliefs, on a posterior known in closed form."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tunewise.belief._model import _stretch

# Data y_1..y_n ~ N(mu, SIGMA) with SIGMA known, prior mu ~ N(PRIOR_MEAN, PRIOR_COV): the posterior of mu is
# Gaussian with covariance (PRIOR_COV^-1 + n SIGMA^-1)^-1 and mean COV (PRIOR_COV^-1 PRIOR_MEAN + n SIGMA^-1 ybar).
SIGMA = np.array([[1.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 2.0]])  # correlated, unequal scales
PRIOR_MEAN = np.zeros(3)
PRIOR_COV = 4.0 * np.eye(3)


@pytest.fixture(scope="module")
def conjugate():
    """The data's log-posterior (vectorised over rows), the closed-form mean and covariance, and a chain."""
    rng = np.random.default_rng(7)
    data = rng.multivariate_normal([1.0, -2.0, 0.5], SIGMA, size=5)
    sigma_inv, prior_inv = np.linalg.inv(SIGMA), np.linalg.inv(PRIOR_COV)
    cov = np.linalg.inv(prior_inv + len(data) * sigma_inv)
    mean = cov @ (prior_inv @ PRIOR_MEAN + len(data) * sigma_inv @ data.mean(axis=0))

    def log_prob(theta):
        resid = data[None, :, :] - theta[:, None, :]
        prior = theta - PRIOR_MEAN
        return (-0.5 * np.einsum("wnd,de,wne->w", resid, sigma_inv, resid)
                - 0.5 * np.einsum("wd,de,we->w", prior, prior_inv, prior))

    start = mean + 0.01 * rng.standard_normal((32, 3))  # a tight ball, as emcee's examples start
    chain = _stretch(log_prob, start, 3000, np.random.default_rng(0))
    return mean, cov, chain[500:].reshape(-1, 3)


def test_the_sample_mean_and_covariance_are_the_posteriors(conjugate):
    mean, cov, samples = conjugate
    std = np.sqrt(np.diag(cov))
    # 80,000 correlated draws (autocorrelation time ~30 steps): the mean's error is ~0.03 std
    np.testing.assert_allclose((samples.mean(axis=0) - mean) / std, 0.0, atol=0.1)
    np.testing.assert_allclose(np.cov(samples.T) / np.outer(std, std), cov / np.outer(std, std), atol=0.1)


def test_the_marginals_are_gaussian(conjugate):
    mean, cov, samples = conjugate
    thinned = samples[::400]  # 200 draws, 12 steps of every walker apart and more: close to independent
    for k in range(3):
        z = (thinned[:, k] - mean[k]) / np.sqrt(cov[k, k])
        assert stats.kstest(z, "norm").pvalue > 0.01


def test_the_chain_moves_and_stays_inside_the_support():
    # a uniform posterior on the unit square, -inf outside: no walker ever leaves it, and the walkers mix
    def log_prob(theta):
        return np.where(((theta >= 0) & (theta <= 1)).all(axis=1), 0.0, -np.inf)

    rng = np.random.default_rng(1)
    chain = _stretch(log_prob, 0.5 + 0.01 * rng.standard_normal((16, 2)), 2000, rng)
    assert np.all((chain >= 0) & (chain <= 1))
    samples = chain[500:].reshape(-1, 2)
    np.testing.assert_allclose(samples.mean(axis=0), 0.5, atol=0.03)
    np.testing.assert_allclose(samples.var(axis=0), 1 / 12, rtol=0.1)
    assert 0.2 < np.mean(np.any(chain[1:] != chain[:-1], axis=2)) < 0.9  # the share of accepted moves
