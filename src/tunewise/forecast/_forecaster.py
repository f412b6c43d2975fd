"""The forecaster: from a snapshot of the run to a :class:`~tunewise.forecast.Forecast`.

>>> from tunewise.forecast import CurveFit
>>> from tunewise.lab.synthetic import synthetic
>>> from tunewise.lab.replay import TraceRun
>>> from tunewise.schedulers import RoundRobin
>>> run = TraceRun(synthetic(n_tasks=3, trials=96, seeds=1, seed=1), RoundRobin(), seed_index=0,
...                decision_cost=0.0)
>>> for _ in range(12):
...     _ = run.step()
>>> forecaster = Forecaster(seed=0, fit=CurveFit(n_steps=60, burn_in=30))
>>> forecast = forecaster(run.ledger.snapshot(), seconds_left=60.0)
>>> forecast.median[0] >= forecast.median[-1] and forecast.low[-1] <= forecast.median[-1] <= forecast.high[-1]
True
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np

from tunewise.forecast import _allocation, _curves
from tunewise.forecast._result import END_LEVELS, Forecast
from tunewise.tuning.state import Snapshot

ALLOCATIONS = ("greedy", "recent")
#: The defaults of :class:`Forecaster`'s spread, gain scale and stall, chosen by ``bench/studies/forecast/forecast.py``.
SPREAD = 0.5
GAIN_SCALE = 1.0
STALL = 0.15
_MAX_SLOTS = 4000  # a longer horizon is cut here
_POINTS = 48  # times a forecast keeps between now and the budget's end


class Forecaster:
    """Forecasts the model latency (the estimate; the compiled model once a check measured it) from a frozen
    :class:`~tunewise.tuning.state.Snapshot`.

    Each task's best latency after more slots is sampled from its learning-curve posterior (DynaTune's belief
    model, fitted as ``fit`` says, :class:`~tunewise.forecast.CurveFit`; borrowed from the fitted tasks for a task
    without one); the remaining slots, at the run's pace so far and as many as the budgets leave (at most
    4000), go to the tasks by ``allocation`` (:mod:`tunewise.forecast._allocation`). Each of ``samples`` futures
    is the weighted sum of its tasks' futures, its gain scaled by ``gain_scale * exp(spread * z)`` and none for
    the lowest ``stall`` share of ``z ~ N(0, 1)`` (chosen on the committed traces:
    ``bench/studies/forecast/findings.md``); once a check measured the model, each adds the gap between the
    latest check and its estimate. Everything random comes from ``seed`` and the snapshot, so a forecast depends
    on the snapshot alone; ``goal`` (seconds) is carried by every forecast.
    """

    def __init__(self, *, allocation: str = "greedy", samples: int = 256, fit: _curves.CurveFit | None = None,
                 spread: float = SPREAD, gain_scale: float = GAIN_SCALE, stall: float = STALL,
                 goal: float | None = None, seed: int | None = None):
        if allocation not in ALLOCATIONS:
            raise ValueError(f"unknown allocation {allocation!r}; valid: {', '.join(ALLOCATIONS)}")
        if not spread >= 0:
            raise ValueError(f"spread must be >= 0, got {spread!r}")
        if not gain_scale > 0:
            raise ValueError(f"gain_scale must be > 0, got {gain_scale!r}")
        if not 0 <= stall < 1:
            raise ValueError(f"stall must be in [0, 1), got {stall!r}")
        if not isinstance(samples, int) or samples < 10:
            raise ValueError(f"samples must be an integer >= 10, got {samples!r}")
        if goal is not None and not goal > 0:
            raise ValueError(f"goal must be > 0 seconds, got {goal!r}")
        self.allocation = allocation
        self.samples = samples
        self.spread = spread
        self.gain_scale = gain_scale
        self.stall = stall
        self.goal = goal
        self.seed = seed
        self._fits = _curves.TaskFits(fit=fit or _curves.CurveFit(), seed=seed)
        self._entropy = np.random.SeedSequence(seed).entropy

    def __call__(self, snapshot: Snapshot, *, seconds_left: float = math.inf) -> Forecast | None:
        """The forecast from ``snapshot`` with ``seconds_left`` of tuning time under the budget (``inf``: no
        time limit); ``None`` when there is nothing to forecast from (no trial measured, an estimate that is
        not finite, no budget that bounds the run, no task left to tune)."""
        futures = self.futures(snapshot, seconds_left=seconds_left)
        return None if futures is None else futures.forecast(spread=self.spread, gain_scale=self.gain_scale,
                                                             stall=self.stall)

    def futures(self, snapshot: Snapshot, *, seconds_left: float = math.inf) -> Futures | None:
        """The sampled futures :meth:`__call__` summarises, before their gains are scaled (``None`` as there):
        :meth:`Futures.forecast` makes the forecast of any ``spread``, ``gain_scale`` and ``stall`` from them."""
        now = snapshot.estimated_latency()
        live = snapshot.live
        if snapshot.trials == 0 or snapshot.elapsed <= 0 or not math.isfinite(now) or not live:
            return None
        per_slot = snapshot.trials_per_slot
        slot_seconds = snapshot.elapsed / snapshot.trials * per_slot
        caps = np.array([_cap(snapshot, t.trials) for t in live], dtype=float)
        slots = min(_slots_left(snapshot, seconds_left, slot_seconds), caps.sum())
        if not 0 < slots < math.inf:
            return None
        slots = int(min(slots, _MAX_SLOTS))
        caps = np.minimum(caps, slots).astype(int)
        rng = np.random.default_rng(np.random.SeedSequence(self._entropy, spawn_key=(snapshot.slot,)))
        futures = self._futures(snapshot, live, caps, rng)
        taken = self._allocate(snapshot, live, futures, caps, slots)
        fixed = now - sum(t.weight * t.current_latency for t in live)
        paths = fixed + sum(f[:, taken[k]] for k, f in enumerate(futures))
        checked = any(math.isfinite(latency) for _, latency in snapshot.measured)
        return Futures(slot=snapshot.slot - 1, elapsed=snapshot.elapsed, slot_seconds=slot_seconds, now=now,
                       paths=np.minimum.accumulate(paths, axis=1), normals=rng.standard_normal(self.samples),
                       untried=sum(not math.isfinite(t.best) for t in live), goal=self.goal,
                       untried_share=sum(t.weight * t.current_latency for t in live if not math.isfinite(t.best)) / now,
                       gap=snapshot.calibrated_latency() - now if checked else None)

    def _futures(self, snapshot: Snapshot, live, caps: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
        """Per live task, ``samples`` sampled futures of its weighted latency after ``0..cap`` more slots."""
        per_slot = snapshot.trials_per_slot
        fits = [self._fits.posterior(t, per_slot) for t in live]
        donors = [(t, m) for t, m in zip(live, fits, strict=True) if m is not None]
        futures = []
        for task, posterior, cap in zip(live, fits, caps, strict=True):
            counts = task.trials + per_slot * np.arange(cap + 1, dtype=float)
            if posterior is not None:
                latency = _curves.sampled(posterior, task, counts, self.samples, rng)
            else:
                latency = _curves.borrowed(donors, task, counts, self.samples, rng)
            futures.append(task.weight * latency)
        return futures

    def _allocate(self, snapshot: Snapshot, live, futures, caps: np.ndarray, slots: int) -> np.ndarray:
        if self.allocation == "greedy":
            return _allocation.greedy([f.mean(axis=0) for f in futures], slots)
        window = snapshot.slot - 2 * len(live)
        recent = np.array([sum(n >= window for n in t.slot_numbers) for t in live], dtype=float)
        shares = recent / recent.sum() if recent.sum() > 0 else np.full(len(live), 1.0 / len(live))
        return _allocation.recent(shares, caps, slots)


def _cap(snapshot: Snapshot, trials: int) -> float:
    """Slots a task with ``trials`` may still have under the per-task budget (``inf`` without one)."""
    if snapshot.per_task_trials is None:
        return math.inf
    return max(0, math.ceil((snapshot.per_task_trials - trials) / snapshot.trials_per_slot))


def _slots_left(snapshot: Snapshot, seconds_left: float, slot_seconds: float) -> float:
    """Slots the run's time and trial budgets leave (``inf``: neither is set): a slot started before the time
    runs out runs whole."""
    left = math.inf
    if math.isfinite(seconds_left):
        left = min(left, max(0, math.ceil(seconds_left / slot_seconds)))
    if snapshot.max_trials is not None:
        left = min(left, max(0, math.ceil((snapshot.max_trials - snapshot.trials) / snapshot.trials_per_slot)))
    return left


def _floats(values) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


@dataclass(frozen=True)
class Futures:
    """The sampled futures of the estimate made after slot ``slot`` at ``elapsed`` seconds of tuning, when it
    was ``now`` seconds: ``paths[i, r]`` is future ``i`` after ``r`` more slots of ``slot_seconds`` each (each
    row non-increasing, its first value ``now``); ``normals[i]`` is the draw that scales future ``i``'s gain.
    ``untried``, ``untried_share``, ``goal`` and ``gap`` are the :class:`Forecast`'s."""

    slot: int
    elapsed: float
    slot_seconds: float
    now: float
    paths: np.ndarray
    normals: np.ndarray
    untried: int
    untried_share: float
    goal: float | None
    gap: float | None

    def forecast(self, *, spread: float, gain_scale: float, stall: float) -> Forecast:
        """The forecast these futures make with each one's gain (its log latency drop from now) scaled by
        ``gain_scale * exp(spread * normals[i])``, or by 0 where ``normals[i]`` lies in the lowest share
        ``stall`` of ``N(0, 1)``, plus the :attr:`gap` when a check measured one."""
        slots = self.paths.shape[1] - 1
        keep = np.unique(np.linspace(0, slots, min(slots + 1, _POINTS)).round().astype(int))
        factor = gain_scale * np.exp(spread * self.normals[:, None])
        if stall > 0:
            factor[self.normals < statistics.NormalDist().inv_cdf(stall)] = 0.0
        paths = self.now * (self.paths[:, keep] / self.now) ** factor + (self.gap or 0.0)
        low, median, high = np.quantile(paths, (0.1, 0.5, 0.9), axis=0)
        return Forecast(slot=self.slot, elapsed=self.elapsed, times=_floats(self.elapsed + keep * self.slot_seconds),
                        low=_floats(low), median=_floats(median), high=_floats(high),
                        end=_floats(np.quantile(paths[:, -1], END_LEVELS)), untried=self.untried, goal=self.goal,
                        untried_share=self.untried_share, gap=self.gap)
