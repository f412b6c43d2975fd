"""MetaSchedule's XGBoost cost model, seeded: its warm-up scores come from its own generator; optionally started
from a pretrained booster."""

from __future__ import annotations

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import XGBModel

from tunewise.cost_models import _features, _pretrained


@derived_object
class XGB(XGBModel._cls):
    """MetaSchedule's ``XGBModel`` (the stock loop's ``"xgb"``), unchanged but for its randomness and when
    it trains, and optionally started from a pretrained booster.

    The stock model scores candidates with ``np.random.uniform`` (the global RNG) until it has
    ``num_warmup_samples`` measurements; here they come from a generator seeded by ``seed``, which also
    seeds XGBoost (``XGBConfig.seed``). The stock model also trains a booster after every update before then,
    which no score uses; here the first booster is trained at the first update that reaches
    ``num_warmup_samples``. Every other keyword argument is ``XGBModel``'s.

    With ``prior`` (a :class:`~tunewise.cost_models._pretrained.Prior`) there is no warm-up: the prior's
    booster scores candidates until the first update; from then on the run's own booster is trained at each
    update as the stock model trains it (on the run's data alone, once it has grown by a fifth), and a
    candidate's score is the mean of its ranks among the candidates scored, by the prior and by the run's
    booster. The blend ranked held-out workloads better than boosting on from the prior
    (``bench/cost_model_quality.py``). Features: :func:`~tunewise.cost_models._features.at_least_one_row`.
    """

    def __init__(self, *, seed: int = 0, prior: _pretrained.Prior | None = None, **kwargs):
        super().__init__(**kwargs)
        self.extractor = _features.at_least_one_row(self.extractor)
        self.config = self.config._replace(seed=seed)
        self._rng = np.random.default_rng(seed)
        self.prior = prior

    def _train(self, xs, ys) -> None:
        if self.prior is None and self.data_size < self.num_warmup_samples:
            self.last_train_size = 0  # so the update that reaches the warm-up trains
            return
        super()._train(xs, ys)

    def predict(self, context, candidates) -> np.ndarray:
        if self.prior is not None:
            features = [x.numpy().astype("float32") for x in self.extractor.extract_from(context, candidates)]
            prior = _pretrained.predict(self.prior.booster, features)
            if self.booster is None:
                return prior.astype("float64")
            return (_ranks(prior) + _ranks(_pretrained.predict(self.booster, features))) / (2.0 * len(features))
        if self.data_size >= self.num_warmup_samples and self.booster is not None:
            return super().predict(context, candidates)
        return self._rng.uniform(size=len(candidates))


def _ranks(scores: np.ndarray) -> np.ndarray:
    """Each score's rank among ``scores``, from 1 (the lowest); ties in the order given."""
    ranks = np.empty(len(scores))
    ranks[np.argsort(scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return ranks
