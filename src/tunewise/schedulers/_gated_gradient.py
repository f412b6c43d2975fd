"""The gated gradient scheduler: gradient's choice among the tried tasks, expected-gain's rule for a first slot."""

from __future__ import annotations

from tunewise.schedulers._expected_gain import ExpectedGain
from tunewise.schedulers._gradient import Gradient
from tunewise.tuning.state import Snapshot


class GatedGradient(Gradient):
    """:class:`~tunewise.schedulers.Gradient` without its pass over every task: a task gets its first slot only
    when that slot is expected to take more model latency per second than any tried task's next one.

    :class:`~tunewise.schedulers.ExpectedGain` chooses first; an untried task keeps that choice, and when the
    choice is a tried task, the tried task of highest :meth:`~tunewise.schedulers.Gradient.score` gets the slot
    instead (evidence: bench/studies/schedulers/findings.md).

    >>> from tunewise.tuning.state import Snapshot, TaskView
    >>> conv = TaskView(0, "conv", 1, 1e9, 1e-2, (1e-3,), (16,), 16)  # 1 GFLOP in 1 ms once tuned
    >>> reshape = TaskView(1, "reshape", 1, 0.0, 1e-5)  # 10 us untuned
    >>> GatedGradient(seed=0).next(Snapshot((conv, reshape)))  # gradient would try the reshape first
    0
    """

    def __init__(self, *, alpha: float = 0.2, window: int = 3, seed: int | None = None):
        super().__init__(alpha=alpha, window=window, seed=seed)
        self._gain = ExpectedGain()

    def next(self, snapshot: Snapshot) -> int | None:
        choice = self._gain.next(snapshot)
        tried = [t for t in snapshot.live if t.slots > 0]
        if choice is None or choice not in {t.index for t in tried}:
            return choice
        return self.highest_score(tried)
