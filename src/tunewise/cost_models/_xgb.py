"""MetaSchedule's XGBoost cost model, seeded: its warm-up scores come from its own generator."""

from __future__ import annotations

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import XGBModel


@derived_object
class XGB(XGBModel._cls):
    """MetaSchedule's ``XGBModel`` (the stock loop's ``"xgb"``), unchanged but for its randomness and when
    it trains.

    The stock model scores candidates with ``np.random.uniform`` (the global RNG) until it has
    ``num_warmup_samples`` measurements; here they come from a generator seeded by ``seed``, which also
    seeds XGBoost (``XGBConfig.seed``). The stock model also trains a booster after every update before then,
    which no score uses (a second or more each on a 2-core machine); here the first booster is trained at
    the first update that reaches ``num_warmup_samples``. Every other keyword argument is ``XGBModel``'s.
    """

    def __init__(self, *, seed: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.config = self.config._replace(seed=seed)
        self._rng = np.random.default_rng(seed)

    def _train(self, xs, ys) -> None:
        if self.data_size < self.num_warmup_samples:
            self.last_train_size = 0  # so the update that reaches the warm-up trains
            return
        super()._train(xs, ys)

    def predict(self, context, candidates) -> np.ndarray:
        if self.data_size >= self.num_warmup_samples and self.booster is not None:
            return super().predict(context, candidates)
        return self._rng.uniform(size=len(candidates))
