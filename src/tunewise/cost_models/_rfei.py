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

    - **Features**: MetaSchedule's ``PerStoreFeature`` of each candidate, summed, averaged and maxed over
      its stores (:func:`~tunewise.cost_models._features.aggregate`).
    - **Targets**, as in MetaSchedule's ``XGBModel``: per task (the workload of ``context.mod``), the
      normalised throughput ``min latency of the task / latency``, 0 for a failed candidate; the latency is
      the mean of ``run_secs``, what the database ranks by. The forest
      (:class:`~tunewise.cost_models._forest.ForestEI`, ``n_estimators`` trees) is refitted from scratch
      on all tasks' data at every :meth:`update` once ``warmup`` candidates were measured; before that,
      :meth:`predict` returns uniform random scores.
    - **Scores** (higher is better, as MetaSchedule expects): the expected improvement of each candidate
      over the best measured normalised throughput of its task (1 once the task has a valid measurement,
      0 before). Where every candidate's EI is 0 the predicted throughput ranks them instead.
    - **Exploration**: AdaTune fills a share ``epsilon = mean(sigma) / best`` of each batch with random
      candidates. The search, not the model, picks the batch, so at each :meth:`predict` ``epsilon`` is
      computed over the candidates being scored (capped at ``max_exploration``; 0 turns exploration off)
      and a random ``epsilon`` share of them have their scores shuffled among themselves: they rank at
      random while the distribution of scores is unchanged, so about ``epsilon`` of the candidates the
      search keeps are kept regardless of the model. The last ``epsilon`` is ``exploration_``. (MetaSchedule's
      own ``eps_greedy`` share of random unmeasured candidates still applies on top.)

    ``seed`` seeds the forest and the generator of the random scores; nothing uses the global RNG. Learned
    state: ``forest_`` (``None`` until warm) and ``exploration_``; :meth:`save` pickles it with the data.
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
