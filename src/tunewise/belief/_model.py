"""Bayesian learning-curve model: DynaTune's belief about a task's future throughput."""

from __future__ import annotations

import emcee
import numpy as np
from scipy.optimize import least_squares

from tunewise.belief._families import FAMILIES, CurveFamily
from tunewise.belief._improvement import expected_improvement
from tunewise.belief._segments import last_segment

_LOG_SIGMA = (np.log(1e-4), 0.0)  # bounds of log(noise std), in units of the peak
_MARGIN = 1e-4  # relative: the ML point is pushed this far above the constraint, so the walkers start inside


class CurveModel:
    """Posterior over a parametric best-so-far curve, sampled with MCMC (DynaTune, Wang et al., ICLR 2021).

    ``fit(x, y)`` takes trial indices ``x > 0`` and best-so-far throughput ``y`` normalised by the peak
    (``0..1``; the parameter bounds of the families assume it), and

    1. keeps the last segment of the curve (:func:`~tunewise.belief.last_segment`, breaks at a ``jump``
       relative step; ``jump=None`` keeps the whole curve), extended back across breaks to the last
       ``len(params) + 1`` points when it is shorter: early in tuning, when most slots improve by more than
       ``jump``, a fit across a break beats no fit;
    2. fits the family by least squares (scipy), from a few starting points, with a penalty that keeps the
       curve at the horizon above the best ``y`` seen;
    3. samples the posterior with emcee's affine-invariant ensemble sampler (Goodman & Weare, 2010;
       Foreman-Mackey et al., 2013), ``n_walkers`` started in a tight ball around the least-squares point;
       the likelihood is ``y ~ N(f(x), sigma^2)`` with ``log sigma`` sampled too; the prior is uniform on
       the family's bounds (and on ``log sigma`` in ``[log 1e-4, 0]``) and zero where the curve at the
       horizon falls below the best seen. ``n_steps`` steps, the first ``burn_in`` dropped, every ``thin``-th
       kept: the defaults give the paper's 200 samples.

    ``predict`` returns the mean and standard deviation over the samples of the curve (not of a noisy
    observation of it). With fewer points than the family has parameters plus one, or if the fit or the
    sampler fails, the model falls back to a flat belief: mean = the best ``y`` seen, std =
    ``min(best, 1 - best)`` (it may double, but not pass the peak), or ``0.5`` when the best is 0 or there
    is no data. Every output is finite.

    ``seed`` is anything ``numpy.random.default_rng`` takes; each ``fit`` draws from a generator made from it
    (an integer seed makes every fit reproducible), and emcee gets its own ``RandomState`` seeded from that
    generator, so the global RNG is never used.

    >>> x = np.arange(1.0, 21.0) * 16
    >>> model = CurveModel(n_walkers=8, n_steps=100, burn_in=50, seed=0).fit(x, 0.5 / (1 + (x / 40) ** -1.2))
    >>> mean, std = model.predict([400.0])
    >>> bool(abs(mean[0] - 0.5 / (1 + 10**-1.2)) < 0.02)
    True
    """

    def __init__(
        self,
        family: str = "log-power",
        *,
        n_walkers: int = 10,
        n_steps: int = 500,
        burn_in: int = 300,
        thin: int = 10,
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
            self.ml_params_ = _max_likelihood(curve, x, y, self.best_, self.horizon_)
            if self.ml_params_ is not None:
                self.samples_ = self._sample(curve, x, y, rng)
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

    def _sample(self, curve: CurveFamily, x: np.ndarray, y: np.ndarray, rng: np.random.Generator):
        low, high = _bounds(curve)
        at = np.append(x, self.horizon_)

        def log_prob(theta: np.ndarray) -> np.ndarray:
            inside = np.all((theta >= low) & (theta <= high), axis=1)
            with np.errstate(all="ignore"):
                values = curve(at, theta[:, :-1])
                feasible = values[:, -1] >= self.best_
                resid = (y - values[:, :-1]) / np.exp(theta[:, -1:])
                lp = -0.5 * np.sum(resid * resid, axis=1) - x.size * theta[:, -1]
            ok = inside & feasible & np.isfinite(lp)
            return np.where(ok, lp, -np.inf)

        resid = y - curve(x, self.ml_params_)
        centre = np.append(self.ml_params_, np.clip(np.log(max(np.std(resid), 1e-3)), *_LOG_SIGMA))
        start = _ball(centre, low, high, self.n_walkers, log_prob, rng)
        if start is None:
            return None
        sampler = emcee.EnsembleSampler(self.n_walkers, centre.size, log_prob, vectorize=True)
        state = emcee.State(start, random_state=np.random.RandomState(rng.integers(2**32)).get_state())
        try:
            sampler.run_mcmc(state, self.n_steps, progress=False)
        except ValueError:  # emcee rejects degenerate ensembles; fall back to the flat belief
            return None
        samples = sampler.get_chain(discard=self.burn_in, thin=self.thin, flat=True)
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


def _max_likelihood(curve: CurveFamily, x: np.ndarray, y: np.ndarray, best: float, horizon: float):
    """The least-squares parameters; if they put ``f(horizon)`` below ``best``, refitted with a penalty that
    lifts it a little above. ``None`` if no fit satisfies the constraint."""
    h = np.array([horizon])
    weight = 1e3 * np.sqrt(x.size)

    def residuals(theta, penalty):
        with np.errstate(all="ignore"):
            r = curve(x, theta) - y
            if penalty:
                r = np.append(r, weight * max(0.0, best * (1 + 2 * _MARGIN) - curve(h, theta)[0]))
        return np.nan_to_num(r, nan=1e6, posinf=1e6, neginf=-1e6)

    def solve(start, penalty):
        return least_squares(residuals, start, bounds=bounds, args=(penalty,), method="trf", max_nfev=100)

    def feasible(theta):
        return bool(np.all(np.isfinite(theta)) and curve(h, theta)[0] >= best * (1 + _MARGIN / 2))

    bounds = np.array(curve.bounds).T
    fit = min((solve(start, False) for start in curve.start(x, y)), key=lambda f: f.cost)
    if not feasible(fit.x):
        fit = solve(np.clip(fit.x, *bounds), True)
    return fit.x if feasible(fit.x) else None


def _ball(centre, low, high, n, log_prob, rng, scale=1e-4, tries=30):
    """``n`` walkers with finite log-probability, scattered by ``scale`` relative to ``centre`` (at least
    ``scale**2`` of the bounds' width) and reflected into the bounds."""
    width = scale * np.maximum(np.abs(centre), scale * (high - low))
    walkers = np.empty((n, centre.size))
    todo = np.arange(n)
    for _ in range(tries):
        draw = centre + width * rng.standard_normal((todo.size, centre.size))
        draw = np.where(draw < low, 2 * low - draw, draw)
        draw = np.where(draw > high, 2 * high - draw, draw)
        ok = np.isfinite(log_prob(draw))
        walkers[todo[ok]] = draw[ok]
        todo = todo[~ok]
        if todo.size == 0:
            return walkers
        width = width / 2
    return None
