"""AdaTune's RFEI surrogate, scikit-learn style: a random forest whose trees' spread is the uncertainty.

AdaTune (Li et al., NeurIPS 2020, and the authors' code) fits a random forest of 10 trees to the measured
throughputs, takes the mean ``mu`` and the standard deviation ``sigma`` of the per-tree predictions as a
Gaussian belief, and ranks candidates by their expected improvement over the best measured throughput
instead of by ``mu``. It also sets the share of random exploration from the uncertainty:
``epsilon = mean(sigma) / best``.
"""

from __future__ import annotations

import numpy as np

from tunewise.belief import expected_improvement


class ForestEI:
    """Random forest regressor with per-tree uncertainty and expected improvement.

    ``max_features`` is the share of features tried at each split (scikit-learn's meaning; 1/3 is
    Breiman's default for regression), ``seed`` seeds the forest (the bootstrap samples and the feature
    subsets), so a fit is a function of the data and the seed. Learned state: ``forest_``.

    >>> x = np.linspace(0, 1, 40)[:, None]
    >>> model = ForestEI(seed=0).fit(x, 1 - (x[:, 0] - 0.7) ** 2)
    >>> mu, sigma = model.predict([[0.7], [0.0]], return_std=True)
    >>> bool(mu[0] > mu[1])
    True
    """

    def __init__(self, *, n_estimators: int = 10, max_features: float | str = 1 / 3, min_samples_leaf: int = 1,
                 n_jobs: int | None = None, seed: int | None = None):
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.min_samples_leaf = min_samples_leaf
        self.n_jobs = n_jobs
        self.seed = seed

    def fit(self, X, y) -> ForestEI:
        """Fit the forest to features ``X`` (n x d) and targets ``y`` (n, higher is better)."""
        from sklearn.ensemble import RandomForestRegressor

        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        if X.ndim != 2 or y.shape != (len(X),) or len(X) == 0:
            raise ValueError(f"need X of shape (n, d) and y of shape (n,) with n > 0, got {X.shape} and {y.shape}")
        self.forest_ = RandomForestRegressor(n_estimators=self.n_estimators, max_features=self.max_features,
                                             min_samples_leaf=self.min_samples_leaf, n_jobs=self.n_jobs,
                                             random_state=self.seed).fit(X, y)
        return self

    def predict(self, X, return_std: bool = False):
        """Mean of the trees' predictions; with ``return_std``, ``(mean, std)`` of them."""
        per_tree = np.stack([tree.predict(np.asarray(X, dtype=float)) for tree in self.forest_.estimators_])
        mean = per_tree.mean(axis=0)
        return (mean, per_tree.std(axis=0)) if return_std else mean

    def expected_improvement(self, X, best: float) -> np.ndarray:
        """``E[max(0, Y - best)]`` under ``Y ~ N(mu, sigma^2)`` for each row of ``X``."""
        mean, std = self.predict(X, return_std=True)
        return expected_improvement(mean, std, best)


def exploration_share(std, best: float, cap: float = 0.5) -> float:
    """AdaTune's share of random candidates, ``mean(sigma) / best``, clipped to ``[0, cap]``.

    ``cap`` (ours) keeps the model in charge of most of each batch; ``best <= 0`` (nothing valid measured
    yet) gives ``cap``.

    >>> exploration_share([0.1, 0.3], best=1.0)
    0.2
    """
    if best <= 0:
        return cap
    return float(min(cap, max(0.0, np.mean(std) / best)))
