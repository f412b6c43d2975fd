"""MetaSchedule's XGBoost cost model, seeded: its warm-up scores come from its own generator; optionally started
from a pretrained booster."""

from __future__ import annotations

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import XGBModel

from tunewise.cost_models import _pretrained

ONLINE_ROUNDS = 20  # trees a pretrained model grows on the run's own data at each retraining


@derived_object
class XGB(XGBModel._cls):
    """MetaSchedule's ``XGBModel`` (the stock loop's ``"xgb"``), unchanged but for its randomness and when
    it trains, and optionally started from a pretrained booster.

    The stock model scores candidates with ``np.random.uniform`` (the global RNG) until it has
    ``num_warmup_samples`` measurements; here they come from a generator seeded by ``seed``, which also
    seeds XGBoost (``XGBConfig.seed``). The stock model also trains a booster after every update before then,
    which no score uses (a second or more each on a 2-core machine); here the first booster is trained at
    the first update that reaches ``num_warmup_samples``. Every other keyword argument is ``XGBModel``'s.

    With ``prior`` (a :class:`~tunewise.cost_models._pretrained.Prior`) there is no warm-up: the prior's
    booster scores candidates until the first update, and each retraining (as the stock model retrains, once
    its data has grown by a fifth) boosts ``ONLINE_ROUNDS`` more trees from the prior on the run's data, so the
    model keeps what it was pretrained with and learns the run's workloads.
    """

    def __init__(self, *, seed: int = 0, prior: _pretrained.Prior | None = None, **kwargs):
        super().__init__(**kwargs)
        self.config = self.config._replace(seed=seed)
        self._rng = np.random.default_rng(seed)
        self.prior = prior

    def _train(self, xs, ys) -> None:
        if self.prior is not None:
            self.booster = _pretrained.boost(xs, ys, seed=self.config.seed, rounds=ONLINE_ROUNDS, config=self.config,
                                             prior=self.prior.booster, nthread=self.config.nthread)
            return
        if self.data_size < self.num_warmup_samples:
            self.last_train_size = 0  # so the update that reaches the warm-up trains
            return
        super()._train(xs, ys)

    def predict(self, context, candidates) -> np.ndarray:
        if self.prior is not None:
            features = [x.numpy().astype("float32") for x in self.extractor.extract_from(context, candidates)]
            booster = self.prior.booster if self.booster is None else self.booster
            return _pretrained.predict(booster, features).astype("float64")
        if self.data_size >= self.num_warmup_samples and self.booster is not None:
            return super().predict(context, candidates)
        return self._rng.uniform(size=len(candidates))
