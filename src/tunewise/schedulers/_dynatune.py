"""DynaTune: task scheduling as a bandit over Bayesian learning-curve beliefs.

Wang et al., "DynaTune: Dynamic Tensor Program Optimization in Deep Neural Network Compilation", ICLR 2021.
The three schedulers share the warm-up, beliefs and rewards below, and choose by UCB, epsilon-greedy or softmax.

- Warm-up: every task gets a slot before any gets a second, in the order of :meth:`prior_reduction`
  (the task's untuned share of the model latency, :mod:`tunewise.schedulers._prior`, times the median
  fraction of untuned latency the tuned tasks have shed). A task with slots but no valid result scores nothing.
- Belief: a live task's best throughput per slot, normalised by the peak, is fitted with a
  :class:`~tunewise.belief.CurveModel` and predicted at the end of one more slot; the reward
  (:meth:`expected_reduction`) is the fraction of the model latency that slot is expected to remove.
- Peak: ``peak_gflops`` when given, else the smallest power of two at least twice the best throughput.

A task's fit is cached until its history, trials, slot size or the peak change, and is seeded from ``seed``,
the task's index and its slot count, so beliefs do not depend on the order they were computed in.
"""

from __future__ import annotations

import abc
import math

import numpy as np

from tunewise.belief import CurveModel, expected_improvement
from tunewise.schedulers._base import TaskScheduler
from tunewise.schedulers._prior import heaviest_first, untuned_share
from tunewise.tuning.state import Snapshot, TaskView


class _DynaTune(TaskScheduler):
    """Warm-up, beliefs and rewards shared by the DynaTune schedulers (see the module docstring)."""

    def __init__(
        self,
        *,
        family: str = "log-power",
        peak_gflops: float | None = None,
        n_walkers: int = 32,
        n_steps: int = 200,
        burn_in: int = 100,
        thin: int = 1,
        jump: float | None = 0.2,
        seed: int | None = None,
    ):
        if peak_gflops is not None and not peak_gflops > 0:
            raise ValueError(f"peak_gflops must be > 0, got {peak_gflops!r}")
        # Checks the belief arguments now rather than at the first fit.
        CurveModel(family, n_walkers=n_walkers, n_steps=n_steps, burn_in=burn_in, thin=thin, jump=jump)
        self.family = family
        self.peak_gflops = peak_gflops
        self.n_walkers = n_walkers
        self.n_steps = n_steps
        self.burn_in = burn_in
        self.thin = thin
        self.jump = jump
        self.seed = seed
        self._entropy = np.random.SeedSequence(seed).entropy
        self._rng = np.random.default_rng(np.random.SeedSequence(self._entropy))
        self._beliefs: dict[int, tuple[tuple, tuple[float, float]]] = {}

    def next(self, snapshot: Snapshot) -> int | None:
        live = snapshot.live
        if not live:
            return None
        untried = [t for t in live if t.slots == 0]
        if untried:  # warm-up: the untried task with the largest prior, which orders them heaviest first
            return heaviest_first(untried)[0].index
        reduction = self.expected_reduction(snapshot)
        return live[self._choose(snapshot, live, np.array([reduction.get(t.index, 0.0) for t in live]))].index

    @abc.abstractmethod
    def _choose(self, snapshot: Snapshot, live: tuple[TaskView, ...], reward: np.ndarray) -> int:
        """The position in ``live`` of the task to tune, given each one's predicted reward."""

    def peak(self, snapshot: Snapshot) -> float:
        """The throughput (GFLOPS) that normalises the curves."""
        if self.peak_gflops is not None:
            return float(self.peak_gflops)
        best = max((t.gflops for t in snapshot.tasks), default=0.0)
        return 2.0 ** math.ceil(math.log2(2.0 * best)) if best > 0 else 1.0

    def prior_reduction(self, snapshot: Snapshot) -> dict[int, float]:
        """Predicted fraction of the model latency that a first slot removes, per live task not yet tried:
        its share of the model latency untuned times the median fraction of their untuned latency that the
        tuned tasks have shed (1 while no task has a valid result); 1 for a task whose untuned schedule
        failed."""
        shed = [1.0 - t.current_latency / t.default_latency for t in snapshot.tasks
                if t.gflops > 0 and 0 < t.default_latency < math.inf]
        fraction = float(np.clip(np.median(shed), 0.0, 1.0)) if shed else 1.0
        return {t.index: untuned_share(t, snapshot) * (fraction if math.isfinite(t.default_latency) else 1.0)
                for t in snapshot.live if t.slots == 0}

    def expected_reduction(self, snapshot: Snapshot) -> dict[int, float]:
        """Predicted fraction of the model latency that one more slot removes, per live measured task."""
        peak, total = self.peak(snapshot), snapshot.estimated_latency()
        out = {}
        for task in snapshot.live:
            if not task.gflops > 0:
                continue
            mean, std = self._belief(task, snapshot.trials_per_slot, peak)
            gain = float(expected_improvement(mean, std, task.gflops / peak)) * peak
            after = task.flops / ((task.gflops + gain) * 1e9)
            out[task.index] = task.weight * max(task.current_latency - after, 0.0) / total
        return out

    def _belief(self, task: TaskView, per_slot: int, peak: float) -> tuple[float, float]:
        horizon = task.trials + per_slot
        key = (task.slots, task.trials, horizon, peak)
        cached = self._beliefs.get(task.index)
        if cached is not None and cached[0] == key:
            return cached[1]
        x, y = [], []
        for best, trials in zip(task.best_history, task.trials_history, strict=False):
            if math.isfinite(best) and best > 0 and trials > 0:
                x.append(trials)
                y.append(task.flops / best / 1e9 / peak)
        seed = np.random.SeedSequence(self._entropy, spawn_key=(task.index, task.slots))
        model = CurveModel(
            self.family,
            n_walkers=self.n_walkers,
            n_steps=self.n_steps,
            burn_in=self.burn_in,
            thin=self.thin,
            jump=self.jump,
            seed=seed,
        ).fit(x, y, horizon=horizon)
        mean, std = model.predict([horizon])
        belief = (float(mean[0]), float(std[0]))
        self._beliefs[task.index] = (key, belief)
        return belief


class DynaTune(_DynaTune):
    """DynaTune's UCB scheduler: the live task with the largest ``reward + share * sqrt(c * ln t / n)`` gets the slot.

    ``reward`` is the predicted fraction of model latency the slot removes, ``share`` the fraction of the model
    latency the task holds now, ``t`` the slots given so far to all tasks and ``n`` the task's own (at least 1);
    ties go to the earliest declared. The UCB1 bonus is scaled by each task's own share, since its reward lies in
    ``[0, share]`` (evidence for this and for ``c=0.2``: bench/studies/schedulers/findings.md).

    >>> from tunewise.tuning.state import Snapshot, TaskView
    >>> tasks = (TaskView(0, "a", 1, 1e9, 1.0, (0.5, 0.4), (16, 32), 32), TaskView(1, "b", 1, 1e9, 1.0))
    >>> DynaTune(seed=0).next(Snapshot(tasks))  # warm-up: "b" has not been tried
    1
    """

    def __init__(self, *, c: float = 0.2, **kwargs):
        if not c >= 0:
            raise ValueError(f"c must be >= 0, got {c!r}")
        super().__init__(**kwargs)
        self.c = c

    def _choose(self, snapshot, live, reward):
        total = snapshot.estimated_latency()
        share = np.array([t.weight * t.current_latency / total if 0 < total < math.inf else 1.0 for t in live])
        slots = max(sum(t.slots for t in snapshot.tasks), 1)
        bonus = share * np.sqrt(self.c * math.log(slots) / np.array([max(t.slots, 1) for t in live]))
        return int(np.argmax(reward + bonus))


class DynaTuneEpsilonGreedy(_DynaTune):
    """DynaTune with epsilon-greedy choice (the paper's appendix): with probability ``epsilon`` a live task
    drawn uniformly, otherwise the one with the largest predicted reward (ties to the earliest declared).
    """

    def __init__(self, *, epsilon: float = 0.05, **kwargs):
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def _choose(self, snapshot, live, reward):
        if self._rng.random() < self.epsilon:
            return int(self._rng.integers(len(live)))
        return int(np.argmax(reward))


class DynaTuneSoftmax(_DynaTune):
    """DynaTune with softmax sampling (the paper's appendix): a live task is drawn with probability
    proportional to ``exp(reward / (temperature * max_reward))``; rewards are scaled by the largest so that
    ``temperature`` does not depend on the model's latency. All tasks are equally likely when no reward is
    positive.
    """

    def __init__(self, *, temperature: float = 0.1, **kwargs):
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        super().__init__(**kwargs)
        self.temperature = temperature

    def _choose(self, snapshot, live, reward):
        top = reward.max()
        logits = (reward - top) / (self.temperature * top) if top > 0 else np.zeros(len(live))
        p = np.exp(logits)
        return int(self._rng.choice(len(live), p=p / p.sum()))
