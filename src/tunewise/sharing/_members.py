"""The rules of selective tuning's members: which task a member takes its schedules from, when it is given
them, and when it falls back to a search of its own. Pure Python over frozen task views: the run's ledger
applies them.

A member of a group (:class:`~tunewise.sharing.Selection`) is not searched; it is *held*. Its *source* is the
searched task of its group most similar to it: the representative, or a member that fell back and has since
improved on its own (ties: the representative, then the lower index). A member of the last stage of a
network thus follows the representative until a member of its own shape has been searched, and then takes
that one's schedules. A held member is due a transfer when its source has a valid best latency that beats the
source's best at the member's previous transfer from that same source (any valid best, for the first): it is
then given the source's ``top`` best records, fitted to its shape (:func:`~tunewise.sharing.transfer_across`),
as a slot of its own.

After each such slot the member falls back, for good, to a search under the scheduler like any task when:

- the slot measured nothing (no record transferred, or those transferred had all been measured already), or
  every transferred schedule failed;
- its best is no faster than its untuned (default) latency;
- it falls short of what its group predicts, and that matters to the model: its throughput (FLOPs a second
  of its best) is below ``shortfall`` (0.8) times its source's, and its share of the model's FLOPs is at least
  ``minor`` (1 %). A member without FLOPs (a layout transform), or too small to repay a search, stays held.

Everything here follows from the slots told, in order (transfer slots through :meth:`Members.told`, the
others through :meth:`Members.searched`), so a resumed run, told the slots the store holds, comes back to the
same state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tunewise.sharing._selection import Selection
from tunewise.state import TaskView

SHORTFALL = 0.8
"""A member falls back when its throughput is below this fraction of its source's."""

MINOR = 0.01
"""A member whose share of the model's FLOPs is below this stays held whatever its throughput."""


class Members:
    """Held members, their sources and their transfers (see the module docstring). ``selection`` holds the
    groups, representatives and similarities; ``shares[k]`` is task ``k``'s share of the model's FLOPs
    (:func:`~tunewise.sharing.flop_shares`); ``top`` is how many records a transfer gives."""

    def __init__(self, selection: Selection, shares: Sequence[float], *, top: int = 1,
                 shortfall: float = SHORTFALL, minor: float = MINOR):
        if top <= 0:
            raise ValueError(f"a transfer gives at least one record, not {top}")
        n = len(selection.source)
        if len(shares) != n or len(selection.similarity) != n:
            raise ValueError(f"{len(shares)} FLOP shares and {len(selection.similarity)} rows of similarities "
                             f"for {n} tasks")
        self.selection = selection
        self.shares = tuple(shares)
        self.top = top
        self.shortfall = shortfall
        self.minor = minor
        self._given: list[tuple[int, float] | None] = [None] * n  # (source, its best) at the last transfer
        self._fell_at: dict[int, float] = {}  # a fallen member's best when it fell back
        self.fallen: set[int] = set()
        self.improved: set[int] = set()  # fallen members that have since improved by their own search

    def source(self, k: int) -> int | None:
        """The task ``k`` is held for, or ``None`` when it is searched (a representative, a task alone in its
        group, or a member that fell back)."""
        representative = self.selection.source[k]
        if representative is None or k in self.fallen:
            return None
        similarity = self.selection.similarity[k]
        candidates = [j for j in self.improved if self.selection.source[j] == representative]
        return max([representative, *candidates], key=lambda j: (similarity[j], j == representative, -j))

    def due(self, tasks: Sequence[TaskView]) -> int | None:
        """The first held, unfinished member due a transfer, or ``None``."""
        for view in tasks:
            s = self.source(view.index)
            if s is None or view.finished or not math.isfinite(tasks[s].best):
                continue
            given = self._given[view.index]
            if given is None or given[0] != s or tasks[s].best < given[1]:
                return view.index
        return None

    def told(self, member: TaskView, source: TaskView, latencies: Sequence[float]) -> None:
        """A transfer slot of ``member`` measured ``latencies`` (``member`` as it is after the slot, ``source``
        as it was given)."""
        self._given[member.index] = (source.index, source.best)
        if (not any(math.isfinite(x) for x in latencies) or member.best >= member.default_latency
                or (self.shares[member.index] >= self.minor and member.flops > 0 and source.gflops > 0
                    and member.gflops < self.shortfall * source.gflops)):
            self.fallen.add(member.index)
            self._fell_at[member.index] = member.best

    def searched(self, task: TaskView) -> None:
        """A searched slot of ``task`` was told (``task`` as it is after it): a member that fell back becomes a
        source for its group once its own search beats the best it fell back with."""
        if task.index in self.fallen and task.best < self._fell_at[task.index]:
            self.improved.add(task.index)
