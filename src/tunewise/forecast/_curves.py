"""Each task's sampled futures: its best latency after more slots, drawn from its learning-curve posterior.

A task with a posterior (:class:`~tunewise.belief.CurveModel`, DynaTune's belief, fitted to the task's
best-so-far speed against its trials: :class:`TaskFits`) gets futures drawn from it. A task without one (not
measured yet, or too few points to fit) borrows them: each sampled future follows a fitted task drawn at
random, scaled to the task's own latency (:func:`borrowed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tunewise.belief import FAMILIES, CurveModel
from tunewise.tuning.state import TaskView

_POINTS = 64  # the most points of a task's curve a fit takes


@dataclass(frozen=True)
class Posterior:
    """A task's fitted curve: ``model`` fitted to ``scale / best`` (the task's speed, in ``0..1``) against its
    trials, so a sampled curve value ``f`` stands for the latency ``scale / f``."""

    model: CurveModel
    scale: float

    def latencies(self, counts: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The latency (seconds) on the curves of posterior samples ``rows`` (indices into the model's samples)
        at trial counts ``counts``: ``(len(rows), len(counts))``, ``inf`` where a curve gives no speed."""
        with np.errstate(all="ignore"):
            latency = self.scale / FAMILIES[self.model.family](counts, self.model.samples_[rows, :-1])
        return np.where(np.isfinite(latency) & (latency > 0), latency, np.inf)

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` random rows of the posterior samples."""
        return rng.integers(len(self.model.samples_), size=n)


@dataclass(frozen=True, kw_only=True)
class CurveFit:
    """How a task's learning curve is fitted: :class:`~tunewise.belief.CurveModel`'s ``family``, ``n_walkers``,
    ``n_steps``, ``burn_in`` and ``jump``."""

    family: str = "log-power"
    n_walkers: int = 32
    n_steps: int = 200
    burn_in: int = 100
    jump: float | None = None


class TaskFits:
    """The posterior of each task's curve (:class:`Posterior`), fitted as ``fit`` says (:class:`CurveFit`) to
    the task's speed after each of its trials (at most 64 of them, evenly spaced), and kept until the task has
    more trials. Each fit is seeded from ``seed``, the task's index and its slot count, so it does not depend on
    when it is made.

    A task's speed is its first valid best latency over its best latency since, over the smallest power of two
    at least twice its speed-up so far: a curve in ``0..1`` that tasks without FLOPs have too (DynaTune's
    throughput over the peak needs FLOPs)."""

    def __init__(self, *, fit: CurveFit, seed):
        self.fit = fit
        self._entropy = np.random.SeedSequence(seed).entropy
        self._cache: dict[int, tuple[tuple, Posterior | None]] = {}

    def posterior(self, task: TaskView, per_slot: int) -> Posterior | None:
        """The task's fitted curve, ``None`` when it has no posterior samples."""
        key = (task.trials, per_slot)
        cached = self._cache.get(task.index)
        if cached is not None and cached[0] == key:
            return cached[1]
        points = [(j + 1, best) for j, best in enumerate(task.trial_bests) if 0 < best < math.inf]
        if len(points) > _POINTS:
            points = [points[i] for i in np.linspace(0, len(points) - 1, _POINTS).round().astype(int)]
        fitted = None
        if points:
            first = points[0][1]
            scale = first / 2.0 ** math.ceil(math.log2(2.0 * first / points[-1][1]))
            seed = np.random.SeedSequence(self._entropy, spawn_key=(task.index, task.slots))
            fit = self.fit
            model = CurveModel(fit.family, n_walkers=fit.n_walkers, n_steps=fit.n_steps, burn_in=fit.burn_in,
                               jump=fit.jump, seed=seed)
            model.fit([x for x, _ in points], [scale / best for _, best in points], horizon=task.trials + per_slot)
            fitted = Posterior(model, scale) if model.samples_ is not None else None
        self._cache[task.index] = (key, fitted)
        return fitted


def sampled(posterior: Posterior, task: TaskView, counts: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` sampled futures of ``task``'s latency (its best, or its default where that is faster) at trial
    counts ``counts`` (the first: its trials so far), from its own posterior: its latency now times each
    sampled curve's ratio from the first count on: ``(n, len(counts))``, never above its latency now."""
    return task.current_latency * _ratios(posterior.latencies(counts, posterior.draw(n, rng)))


def _ratios(curve: np.ndarray) -> np.ndarray:
    """Each row of latencies over its first value, at most 1 (1 where it is not finite)."""
    with np.errstate(all="ignore"):
        ratios = np.where(np.isfinite(curve), curve / curve[:, :1], 1.0)
    return np.minimum(np.nan_to_num(ratios, nan=1.0), 1.0)


def borrowed(donors: list[tuple[TaskView, Posterior]], task: TaskView, counts: np.ndarray, n: int,
             rng: np.random.Generator) -> np.ndarray:
    """``n`` sampled futures of ``task`` (without a posterior) at its trial counts ``counts``, each following a
    fitted donor task drawn at random: the task's latency now times the donor curve's ratio between the
    task's trial counts and its trials so far (from the donor's default latency for a task not measured
    yet). ``(n, len(counts))``, never above the task's latency now."""
    ratios = np.ones((n, counts.size))
    measured = math.isfinite(task.best)
    usable = [(t, p) for t, p in donors if measured or 0 < t.default_latency < math.inf]
    if not usable:
        return np.full((n, counts.size), task.current_latency)
    picks = rng.integers(len(usable), size=n)
    for d, (donor, posterior) in enumerate(usable):
        mine = np.flatnonzero(picks == d)
        if not mine.size:
            continue
        curve = posterior.latencies(np.maximum(counts, 1.0), posterior.draw(mine.size, rng))
        if not measured:  # from the donor's default latency, at no trials
            curve[:, 0] = donor.default_latency
        ratios[mine] = _ratios(curve)
    return task.current_latency * ratios
