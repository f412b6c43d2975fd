"""Bayesian learning-curve model: DynaTune's belief about a task's future throughput."""

from __future__ import annotations

import numpy as np

from tunewise.belief._families import FAMILIES, CurveFamily
from tunewise.belief._improvement import expected_improvement
from tunewise.belief._segments import last_segment

_LOG_SIGMA = (np.log(1e-4), 0.0)  # bounds of log(noise std), in units of the peak
_DRAWS = 1024  # proposals the walkers are resampled from
_SCREEN = 64  # uniform draws from the bounds screened for the least-squares start
_LSQ = {"method": "dogbox", "ftol": 1e-5, "xtol": 1e-5, "gtol": 1e-5, "max_nfev": 100}  # a start, not a result
_MARGIN = 1e-4  # relative: the ML point is pushed this far above the constraint, so the walkers start inside


class CurveModel:
    """Posterior over a parametric best-so-far curve, sampled with MCMC (DynaTune, Wang et al., ICLR 2021).

    ``fit(x, y)`` takes trial indices ``x > 0`` and best-so-far throughput ``y`` normalised by the peak
    (``0..1``), keeps the curve's last segment (:func:`~tunewise.belief.last_segment` at a ``jump``; ``None``
    keeps it all), fits the family by least squares, and samples the posterior with emcee's affine-invariant
    ensemble sampler (Goodman & Weare, 2010): ``y ~ N(f(x), sigma^2)``, a uniform prior on the family's bounds,
    zero where the curve at the horizon falls below the best seen. ``n_walkers`` start from the Laplace
    approximation; ``n_steps`` steps, ``burn_in`` dropped, every ``thin``-th kept (the defaults, against the
    paper's sizes: bench/studies/schedulers/findings.md).

    ``predict`` returns the mean and standard deviation of the curve over the samples. With too few points, or
    if the fit or sampler fails, the belief is flat: mean the best ``y``, std ``min(best, 1 - best)`` (``0.5``
    without data). Every output is finite. Each ``fit`` draws from a generator made from ``seed``.
    """

    def __init__(
        self,
        family: str = "log-power",
        *,
        n_walkers: int = 32,
        n_steps: int = 200,
        burn_in: int = 100,
        thin: int = 1,
        jump: float | None = 0.2,
        seed=None,
    ):
        if family not in FAMILIES:
            raise ValueError(f"unknown curve family {family!r}; valid: {', '.join(FAMILIES)}")
        dim = len(FAMILIES[family].params) + 1
        if not isinstance(n_walkers, int) or n_walkers < 2 * dim:
            raise ValueError(f"n_walkers must be an integer >= {2 * dim} for {family!r}, got {n_walkers!r}")
        if not (isinstance(n_steps, int) and isinstance(burn_in, int) and 0 <= burn_in < n_steps):
            raise ValueError(f"need integers 0 <= burn_in < n_steps, got {burn_in!r} and {n_steps!r}")
        if not isinstance(thin, int) or thin < 1:
            raise ValueError(f"thin must be an integer >= 1, got {thin!r}")
        if jump is not None and not jump > 0:
            raise ValueError(f"jump must be > 0 or None, got {jump!r}")
        self.family = family
        self.n_walkers = n_walkers
        self.n_steps = n_steps
        self.burn_in = burn_in
        self.thin = thin
        self.jump = jump
        self.seed = seed

    def __repr__(self) -> str:
        return f"CurveModel({', '.join(f'{k}={v!r}' for k, v in vars(self).items() if not k.endswith('_'))})"

    def fit(self, x, y, *, horizon: float | None = None) -> CurveModel:
        """Fit the posterior to the points ``(x, y)``; ``horizon`` (default: the last ``x``) is where the
        prior keeps the curve at or above the best ``y``. Pairs with a non-finite value are dropped."""
        x, y = _points(x, y)
        curve = FAMILIES[self.family]
        self.best_ = float(np.max(y)) if y.size else 0.0
        fit_from = max(y.size - len(curve.params) - 1, 0)  # enough points to fit, jumps or not
        cut = last_segment(y, self.jump) if self.jump is not None else 0
        self.segment_start_ = min(cut, fit_from)
        x, y = x[self.segment_start_ :], y[self.segment_start_ :]
        self.horizon_ = float(horizon) if horizon is not None else (float(x[-1]) if x.size else 1.0)
        self.ml_params_ = self.samples_ = None
        if x.size > len(curve.params):
            rng = np.random.default_rng(self.seed)
            ml = _max_likelihood(curve, x, y, self.best_, self.horizon_, rng)
            if ml is not None:
                self.ml_params_ = ml.x
                self.samples_ = self._sample(curve, x, y, ml, rng)
        return self

    def predict(self, x_new, return_std: bool = True):
        """Posterior mean of the curve at ``x_new`` and, with ``return_std``, its standard deviation."""
        if not hasattr(self, "best_"):
            raise RuntimeError("CurveModel.predict() before fit()")
        x_new = np.atleast_1d(np.asarray(x_new, dtype=float))
        mean = std = None
        if self.samples_ is not None:
            with np.errstate(all="ignore"):
                values = FAMILIES[self.family](x_new, self.samples_[:, :-1])
                mean, std = values.mean(axis=0), values.std(axis=0)
            if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std))):
                mean = std = None
        if mean is None:
            fallback = min(self.best_, 1.0 - self.best_) if self.best_ > 0 else 0.5
            mean, std = np.full(x_new.shape, self.best_), np.full(x_new.shape, max(fallback, 0.0))
        return (mean, std) if return_std else mean

    def expected_improvement(self, x_new, best: float) -> np.ndarray:
        """Expected improvement of the curve at ``x_new`` over ``best`` (see :func:`expected_improvement`)."""
        mean, std = self.predict(x_new)
        return expected_improvement(mean, std, best)

    def _sample(self, curve: CurveFamily, x: np.ndarray, y: np.ndarray, ml, rng: np.random.Generator):
        low, high = _bounds(curve)
        at = np.append(x, self.horizon_)

        def log_prob(theta: np.ndarray) -> np.ndarray:  # called under np.errstate(all="ignore")
            # -inf outside the support; nan (the curve undefined) counts as -inf for the sampler too
            values = curve.fn(at, *theta[:, :-1].T[:, :, None])
            resid = y - values[:, :-1]
            log_sigma = theta[:, -1]
            lp = -0.5 * np.einsum("ij,ij->i", resid, resid) * np.exp(-2.0 * log_sigma) - x.size * log_sigma
            lp[((theta < low) | (theta > high)).any(axis=1) | (values[:, -1] < self.best_)] = -np.inf
            return lp

        centre, spread = _laplace(ml, x.size, low, high)
        with np.errstate(all="ignore"):
            start = _ball(centre, spread, self.n_walkers, log_prob, rng)
            if start is None:
                return None
            chain = _stretch(log_prob, start, self.n_steps, rng)
        samples = chain[self.burn_in :: self.thin].reshape(-1, centre.size)
        return samples if samples.size and np.all(np.isfinite(samples)) else None


def _points(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = np.atleast_1d(np.asarray(x, dtype=float))
    y = np.atleast_1d(np.asarray(y, dtype=float))
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"x and y must be 1-D of the same length, got shapes {x.shape} and {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if np.any(x <= 0):
        raise ValueError("trial indices x must be > 0")
    order = np.argsort(x, kind="stable")
    return x[order], y[order]


def _bounds(curve: CurveFamily) -> tuple[np.ndarray, np.ndarray]:
    low, high = np.array(curve.bounds + (_LOG_SIGMA,)).T
    return low, high


def _max_likelihood(curve: CurveFamily, x: np.ndarray, y: np.ndarray, best: float, horizon: float,
                    rng: np.random.Generator):
    """The least-squares fit (scipy's ``OptimizeResult``), from the best of the family's starting points and
    ``_SCREEN`` uniform draws from its bounds; if it puts ``f(horizon)`` below ``best``, refitted with a
    penalty that lifts it a little above. ``None`` if no fit satisfies the constraint."""
    from scipy.optimize import least_squares  # slow to import: on first use

    at = np.append(x, horizon)
    weight = 1e3 * np.sqrt(x.size)

    def batch(thetas, penalty):  # residuals of each row of thetas
        with np.errstate(all="ignore"):
            values = curve(at, thetas)
            r = values[:, :-1] - y
            if penalty:
                lift = weight * np.maximum(0.0, best * (1 + 2 * _MARGIN) - values[:, -1:])
                r = np.concatenate([r, lift], axis=1)
        return np.nan_to_num(r, nan=1e6, posinf=1e6, neginf=-1e6)

    def residuals(theta, penalty):
        return batch(theta[None, :], penalty)[0]

    def jacobian(theta, penalty):  # forward differences, all parameters in one vectorised call
        step = 1e-7 * np.maximum(np.abs(theta), 1e-3)
        r = batch(np.vstack([theta, theta + np.diag(step)]), penalty)
        return ((r[1:] - r[0]) / step[:, None]).T

    def solve(start, penalty):
        return least_squares(residuals, start, jac=jacobian, bounds=bounds, args=(penalty,), **_LSQ)

    def feasible(theta):
        return bool(np.all(np.isfinite(theta)) and curve(at[-1:], theta)[0] >= best * (1 + _MARGIN / 2))

    bounds = np.array(curve.bounds).T
    low, high = bounds
    pad = 1e-6 * (high - low)
    starts = np.vstack([*curve.start(x, y), rng.uniform(low + pad, high - pad, (_SCREEN, low.size))])
    with np.errstate(all="ignore"):
        sse = np.nan_to_num(np.sum((curve(x, starts) - y) ** 2, axis=1), nan=np.inf)
    fit = solve(starts[int(np.argmin(sse))], False)
    if not feasible(fit.x):
        fit = solve(np.clip(fit.x, *bounds), True)
    return fit if feasible(fit.x) else None


def _laplace(ml, n: int, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre and spread (a matrix ``S``: the draws are ``centre + S @ N(0, I)``) of the Laplace
    approximation of the posterior at the least-squares fit ``ml`` of ``n`` points: the curve parameters
    ``N(ml.x, s^2 (J^T J)^-1)`` with ``s^2`` the residual variance, and ``log sigma ~ N(log s, 1 / (2n))``.
    Each standard deviation is capped at a quarter of its bounds' width. Where that is not finite (a
    singular fit), a tight diagonal ball: ``1e-4`` relative to the centre, at least ``1e-8`` of the width."""
    resid, jac = ml.fun[:n], ml.jac[:n]
    s2 = max(float(np.sum(resid * resid)) / max(n - ml.x.size, 1), 1e-8)
    centre = np.append(ml.x, np.clip(0.5 * np.log(s2), *_LOG_SIGMA))
    with np.errstate(all="ignore"):
        values, vectors = np.linalg.eigh(jac.T @ jac)
        root = vectors / np.sqrt(np.where(values > 0, values, np.nan))  # root @ root.T = (J^T J)^-1
    spread = np.zeros((centre.size, centre.size))
    spread[:-1, :-1] = np.sqrt(s2) * root
    spread[-1, -1] = 1.0 / np.sqrt(2.0 * n)
    std = np.sqrt(np.sum(spread * spread, axis=1))
    if not np.all(np.isfinite(spread)) or not np.all(std > 0):
        return centre, np.diag(1e-4 * np.maximum(np.abs(centre), 1e-4 * (high - low)))
    return centre, spread * np.minimum(1.0, 0.25 * (high - low) / std)[:, None]


def _ball(centre, spread, n, log_prob, rng, draws=_DRAWS, tries=30):
    """``n`` distinct walkers with finite log-probability, near the posterior: sampling-importance-resampling
    (Rubin, 1988) from ``draws`` points ``centre + spread @ u``, ``u ~ N(0, I)``, weighted by the posterior
    over that proposal and drawn without replacement in proportion to the weights (Efraimidis & Spirakis,
    2006). With fewer than ``n`` of them inside the support, the spread is halved and the draw repeated, up
    to ``tries`` times (``None`` then)."""
    for _ in range(tries):
        u = rng.standard_normal((draws, centre.size))
        points = centre + u @ spread.T
        log_weight = log_prob(points) + 0.5 * np.sum(u * u, axis=1)
        if np.count_nonzero(np.isfinite(log_weight)) >= n:
            keys = log_weight + rng.gumbel(size=draws)
            return points[np.argsort(-keys)[:n]]
        spread = spread / 2
    return None


def _stretch(log_prob, walkers: np.ndarray, n_steps: int, rng: np.random.Generator, a: float = 2.0) -> np.ndarray:
    """The chain ``(n_steps, walkers, dim)`` of Goodman & Weare's affine-invariant ensemble sampler
    (Comm. App. Math. Comp. Sci., 2010) with the stretch move, scale ``a``: what emcee's default
    ``StretchMove`` does (Foreman-Mackey et al., 2013). The walkers are split in two halves, updated in
    turn, each walker against a random partner from the other half; ``log_prob`` takes a batch of points
    and returns their log-probabilities (``-inf`` outside the support)."""
    n, d = walkers.shape
    walkers = walkers.copy()
    lp = log_prob(walkers)
    z = ((a - 1.0) * rng.random((n_steps, n)) + 1.0) ** 2 / a
    threshold = np.log(rng.random((n_steps, n))) - (d - 1) * np.log(z)  # accept when lp rises by more
    z = z[:, :, None]
    half = n // 2
    # (walkers moved, their partners' half, each one's partner at each step)
    halves = ((slice(0, half), slice(half, n), rng.integers(n - half, size=(n_steps, half))),
              (slice(half, n), slice(0, half), rng.integers(half, size=(n_steps, n - half))))
    chain = np.empty((n_steps, n, d))
    for step in range(n_steps):
        for active, other, partners in halves:
            partner = walkers[other][partners[step]]
            moving, current = walkers[active], lp[active]  # views: updated in place
            proposal = partner + z[step, active] * (moving - partner)
            new = log_prob(proposal)
            accept = new - current > threshold[step, active]
            moving[accept] = proposal[accept]
            current[accept] = new[accept]
        chain[step] = walkers
    return chain
