"""The rules of selective tuning's members: when a member is given its representative's schedules, and when it
falls back to a search of its own. Pure Python over frozen task views: the run's ledger applies them.

A member of a group (:class:`~tunewise.sharing.Selection`) is *held*, not searched. It is due a transfer when
its representative's valid best beats the one at its previous transfer: it is then given the representative's
``top`` best records fitted to its shape (:func:`~tunewise.sharing.transfer_across`), as a slot of its own. A
transfer slot that measured nothing makes it fall back at once, for good, to a search under the scheduler.
Once the representative has *settled* (``settled`` trials measured, or finished), a member falls back when its
best is no faster than its default latency, or when its throughput is below ``shortfall`` times its
representative's and its share of the model's FLOPs is at least ``minor``; a representative that settles
without a valid best sends its members back too. Everything follows from the slots told, in order, so a
resumed run told the slots the store holds comes back to the same state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tunewise.tuning.state import TaskView

SHORTFALL = 0.8
"""A member falls back when its throughput is below this fraction of its representative's."""

MINOR = 0.01
"""A member whose share of the model's FLOPs is below this stays held whatever its throughput."""

SETTLED = 48
"""The trials after which a representative's best is taken as its group's prediction (or once it finished)."""


class Members:
    """Held members and their transfers (see the module docstring). ``sources[k]`` is the representative task
    ``k`` takes schedules from (``None``: ``k`` is searched), ``shares[k]`` task ``k``'s share of the model's
    FLOPs (:func:`~tunewise.sharing.flop_shares`); ``top`` is how many records a transfer gives."""

    def __init__(self, sources: Sequence[int | None], shares: Sequence[float], *, top: int = 1,
                 shortfall: float = SHORTFALL, minor: float = MINOR, settled: int = SETTLED):
        if top <= 0:
            raise ValueError(f"a transfer gives at least one record, not {top}")
        if len(shares) != len(sources):
            raise ValueError(f"{len(shares)} FLOP shares for {len(sources)} tasks")
        self.sources = tuple(sources)
        self.shares = tuple(shares)
        self.top = top
        self.shortfall = shortfall
        self.minor = minor
        self.settled = settled
        self._given = [math.inf] * len(self.sources)  # the representative's best at the member's last transfer
        self.fallen: set[int] = set()

    def source(self, k: int) -> int | None:
        """The representative task ``k`` is held for, or ``None`` when it is searched (a representative, a task
        alone in its group, or a member that fell back)."""
        return None if k in self.fallen else self.sources[k]

    def due(self, tasks: Sequence[TaskView]) -> int | None:
        """The first held, unfinished member due a transfer, or ``None``."""
        for view in tasks:
            r = self.source(view.index)
            if r is not None and not view.finished and tasks[r].best < self._given[view.index]:
                return view.index
        return None

    def transfer_measured(self, member: TaskView, representative: TaskView, latencies: Sequence[float]) -> None:
        """A transfer slot of ``member`` measured ``latencies`` (``member`` as it is after the slot,
        ``representative`` as it was given)."""
        self._given[member.index] = representative.best
        if not latencies:
            self.fallen.add(member.index)
        elif self._has_settled(representative):
            self._judge(member, representative)

    def searched(self, tasks: Sequence[TaskView], k: int) -> None:
        """A search slot of task ``k`` was told (``tasks``: the run after it). When ``k`` is a settled
        representative, its held members that hold its best already are judged; the others are due a transfer,
        and are judged after it."""
        representative = tasks[k]
        if not self._has_settled(representative):
            return
        for view in tasks:
            if self.source(view.index) == k and self._given[view.index] <= representative.best:
                self._judge(view, representative)

    def _has_settled(self, representative: TaskView) -> bool:
        return representative.finished or representative.trials >= self.settled

    def _judge(self, member: TaskView, representative: TaskView) -> None:
        short = (self.shares[member.index] >= self.minor and member.flops > 0 and representative.gflops > 0
                 and member.gflops < self.shortfall * representative.gflops)
        if member.best >= member.default_latency or short:
            self.fallen.add(member.index)
