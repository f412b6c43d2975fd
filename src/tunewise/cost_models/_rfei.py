"""RFEI as a MetaSchedule cost model: AdaTune's random forest, expected improvement and exploration share."""

from __future__ import annotations

import pickle

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from tunewise.belief import expected_improvement
from tunewise.cost_models._features import aggregate
from tunewise.cost_models._forest import ForestEI, exploration_share


@derived_object
class RFEI(PyCostModel):
    """AdaTune's RFEI cost model (Li et al., NeurIPS 2020) for MetaSchedule's evolutionary search.

    - Features: MetaSchedule's ``PerStoreFeature`` summed, averaged and maxed over stores (:func:`aggregate`).
    - Targets, as in ``XGBModel``: per task, ``min latency of the task / latency`` (0 for a failure), the latency
      being the mean of ``run_secs``. The :class:`ForestEI` (``n_estimators`` trees) is refitted on all tasks' data
      at every :meth:`update` once ``warmup`` candidates were measured; before that, scores are uniform random.
    - Scores: each candidate's expected improvement over its task's best normalised throughput (1 once measured,
      0 before); where every EI is 0, the predicted throughput.
    - Exploration: at each :meth:`predict`, ``epsilon = mean(sigma) / best`` over the candidates scored (capped
      at ``max_exploration``; 0 turns it off), and a random ``epsilon`` share of them have their scores shuffled
      among themselves, so they rank at random; the last ``epsilon`` is ``exploration_``.

    ``seed`` seeds the forest and the random scores. Learned state: ``forest_`` (``None`` until warm) and
    ``exploration_``; :meth:`save` pickles it with the data.
    """

    def __init__(self, *, n_estimators: int = 10, max_features: float | str = 1 / 3, warmup: int = 64,
                 max_exploration: float = 0.5, num_tuning_cores: int | None = None, seed: int = 0):
        from tvm.s_tir.meta_schedule.feature_extractor import PerStoreFeature

        super().__init__()
        if warmup < 1:
            raise ValueError(f"warmup must be at least 1, got {warmup}")
        if not 0 <= max_exploration <= 1:
            raise ValueError(f"max_exploration must be in [0, 1], got {max_exploration}")
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.warmup = warmup
        self.max_exploration = max_exploration
        self.num_tuning_cores = num_tuning_cores
        self.seed = seed
        self.extractor = PerStoreFeature()
        self.exploration_ = 0.0
        self._rng = np.random.default_rng(seed)
        self._data: dict[str, tuple[list[np.ndarray], list[float]]] = {}  # workload -> features, latencies
        self.forest_: ForestEI | None = None

    # -- MetaSchedule's CostModel interface -----------------------------------------------------------
    def load(self, path: str) -> None:
        with open(path, "rb") as f:
            state = pickle.load(f)
        self._data, self.forest_, self.exploration_ = state["data"], state["forest"], state["exploration"]
        self._rng.bit_generator.state = state["rng"]

    def save(self, path: str) -> None:
        state = {"data": self._data, "forest": self.forest_, "exploration": self.exploration_,
                 "rng": self._rng.bit_generator.state}
        with open(path, "wb") as f:
            pickle.dump(state, f)

    def update(self, context, candidates, results) -> None:
        if not candidates:
            return
        features, latencies = self._data.setdefault(_workload(context), ([], []))
        features += list(_features_of(self.extractor, context, candidates))
        latencies += [float(np.mean([float(s) for s in r.run_secs])) if r.run_secs else np.inf for r in results]
        if sum(len(lat) for _, lat in self._data.values()) >= self.warmup:
            x = np.concatenate([np.asarray(f) for f, _ in self._data.values()])
            y = np.concatenate([_throughput(lat) for _, lat in self._data.values()])
            self.forest_ = ForestEI(n_estimators=self.n_estimators, max_features=self.max_features,
                                    n_jobs=self.num_tuning_cores, seed=self.seed).fit(x, y)

    def predict(self, context, candidates) -> np.ndarray:
        if self.forest_ is None:
            return self._rng.uniform(size=len(candidates))
        mean, std = self.forest_.predict(_features_of(self.extractor, context, candidates), return_std=True)
        best = self._best(context)
        scores = _scores(mean, std, best)
        self.exploration_ = exploration_share(std, best, self.max_exploration)
        explore = np.flatnonzero(self._rng.random(len(scores)) < self.exploration_)
        scores[explore] = scores[self._rng.permutation(explore)]
        return scores.astype("float64")

    # -- helpers ------------------------------------------------------------------------------------------
    def _best(self, context) -> float:
        """Best measured normalised throughput of the task: 1 with a valid measurement, else 0."""
        _, latencies = self._data.get(_workload(context), ([], []))
        return 1.0 if np.isfinite(latencies).any() else 0.0


def _features_of(extractor, context, candidates) -> np.ndarray:
    per_store = [x.numpy() for x in extractor.extract_from(context, candidates)]
    return aggregate(per_store, extractor.feature_vector_length)


def _workload(context) -> str:
    from tvm.s_tir.meta_schedule.utils import shash2hex

    return shash2hex(context.mod)


def _scores(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """Expected improvement over ``best``; the mean where every EI is 0."""
    ei = expected_improvement(mean, std, best)
    return ei if ei.max() > 0 else mean.copy()


def _throughput(latencies: list[float]) -> np.ndarray:
    """``min(latencies) / latency`` per candidate; 0 for failures (``inf``), all 0 when none is valid."""
    lat = np.asarray(latencies, dtype=float)
    valid = np.isfinite(lat)
    if not valid.any():
        return np.zeros(len(lat))
    return np.where(valid, lat[valid].min() / np.where(valid, lat, 1.0), 0.0)
