"""Fixed-size feature vectors for candidates from MetaSchedule's per-store features (plain numpy), and those
features with a row for every candidate."""

from __future__ import annotations

import functools

import numpy as np


def aggregate(per_store, width: int) -> np.ndarray:
    """One row per candidate: the sum, the mean and the max over its stores, side by side (``3 * width``).

    ``per_store`` holds one ``(stores, width)`` array per candidate, as
    ``ms.feature_extractor.PerStoreFeature`` extracts them (one row per buffer store of the scheduled
    program). The sum carries the total work, the mean and the max the typical and the dominant store; a
    candidate without stores gets zeros.

    >>> aggregate([np.array([[1.0, 2.0], [3.0, 0.0]]), np.zeros((0, 2))], 2).tolist()
    [[4.0, 2.0, 2.0, 1.0, 3.0, 2.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]
    """
    rows = np.zeros((len(per_store), 3 * width))
    for i, features in enumerate(per_store):
        features = np.asarray(features, dtype=float).reshape(-1, width)
        if len(features):
            rows[i] = np.concatenate([features.sum(axis=0), features.mean(axis=0), features.max(axis=0)])
    return rows


def at_least_one_row(extractor):
    """A feature extractor giving ``extractor``'s features (MetaSchedule's ``PerStoreFeature``), with one row of
    zeros for a candidate that has none: a kernel whose stores are all inside tensor intrinsics' calls (the AMX
    products) has no store the features describe. MetaSchedule's XGBoost model sums a candidate's rows by the
    candidate's index, so one candidate without rows shifts the scores of those after it, and a batch without
    any rows stops the search."""
    return _padding_extractor()(extractor)


@functools.cache
def _padding_extractor():
    from tvm.ir.utils import derived_object
    from tvm.runtime import tensor
    from tvm.s_tir.meta_schedule.feature_extractor import PyFeatureExtractor

    @derived_object
    class AtLeastOneRow(PyFeatureExtractor):
        """:func:`at_least_one_row`'s extractor."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.feature_vector_length = inner.feature_vector_length

        def extract_from(self, context, candidates):
            features = [x.numpy() for x in self.inner.extract_from(context, candidates)]
            return [tensor(x if len(x) else np.zeros((1, self.feature_vector_length), x.dtype)) for x in features]

    return AtLeastOneRow
