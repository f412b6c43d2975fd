"""The task scheduler contract."""

from __future__ import annotations

import abc

from tunewise.tuning.state import Snapshot, TaskView


class TaskScheduler(abc.ABC):
    """Decides which task gets the next tuning slot.

    Contract:

    - The session calls :meth:`next` once per slot, before it proposes or measures anything, with a frozen
      :class:`~tunewise.tuning.state.Snapshot` of the run; it gives the slot to the task whose
      :attr:`~tunewise.tuning.state.TaskView.index` is returned, or stops tuning on ``None``.
    - A scheduler is pure with respect to the tuning: it never builds, measures or records, and never mutates
      the snapshot. It may keep private state, but only state derived from the snapshots it was shown and
      from its own generator, seeded by its ``seed`` argument (never the global RNG), so that a run can be
      replayed from its snapshots.
    - It never returns a finished task, and returns ``None`` exactly when no task is live.
    - It may retire tasks: after each slot the ledger asks :meth:`retired` about the slot's task, and finishes
      it when the answer is yes (in a real session, a resumed one and a replay alike). The answer depends on
      the task's :class:`~tunewise.tuning.state.TaskView` alone. A scheduler that retires tasks thus ends the run
      through the ledger's own rule (no task is live) and the snapshot shows every retired task finished.
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
