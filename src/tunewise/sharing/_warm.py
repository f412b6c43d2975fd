"""Warm start across runs and models: which stored workloads a new task starts from.

A store keeps the records of every run, of every model. A task that no run tuned can still start from the best
records of the workloads most like it (a convolution of another shape, tuned for another model): its first
slot measures their best schedules fitted to its shape (:func:`~tunewise.sharing.transfer_across`), and its
search then seeds from what they gave.
"""

from __future__ import annotations

from collections.abc import Iterable

from tunewise.sharing._selection import THRESHOLD
from tunewise.sharing._similarity import Signature, similarity


def warm_sources(signature: Signature, candidates: Iterable[tuple[int, Signature]], *, limit: int,
                 threshold: float = THRESHOLD) -> list[int]:
    """The ids of the ``limit`` workloads of ``candidates`` (``(id, signature of its best record)``) most similar
    to ``signature``, most similar first (ties: in the order given); only those at least ``threshold`` similar."""
    scored = [(similarity(signature, other), order, workload)
              for order, (workload, other) in enumerate(candidates)]
    chosen = sorted((s for s in scored if s[0] >= threshold), key=lambda s: (-s[0], s[1]))
    return [workload for _, _, workload in chosen[:limit]]
