"""The task scheduler contract."""

from __future__ import annotations

import abc

from tunewise.tuning.state import Snapshot, TaskView


class TaskScheduler(abc.ABC):
    """Decides which task gets the next tuning slot.

    Contract:

    - The session calls :meth:`next` once per slot, before it proposes or measures anything, with a frozen
      :class:`~tunewise.tuning.state.Snapshot`; the slot goes to the task whose index is returned, and
      ``None`` (returned exactly when no task is live) stops tuning. A finished task is never returned.
    - A scheduler never builds, measures, records or mutates the snapshot. Its private state derives only from
      the snapshots it was shown and from its own generator, seeded by ``seed`` (never the global RNG), so a run
      can be replayed from its snapshots.
    - After each slot the ledger asks :meth:`retired` about the slot's task, from its
      :class:`~tunewise.tuning.state.TaskView` alone, and finishes it on yes.
    - Constructors take keyword-only arguments, stored unchanged, and raise ``ValueError`` on bad values.
    """

    @abc.abstractmethod
    def next(self, snapshot: Snapshot) -> int | None:
        """The index of the live task that gets the next slot, or ``None`` when no task is live."""

    def retired(self, task: TaskView) -> bool:
        """Whether ``task``, as it stands after a slot, is done in this scheduler's view (never, here)."""
        return False

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"
