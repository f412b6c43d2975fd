"""Fixed-size feature vectors for candidates from MetaSchedule's per-store features (plain numpy)."""

from __future__ import annotations

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
