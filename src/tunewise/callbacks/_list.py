"""Several callbacks told as one."""

from __future__ import annotations

from collections.abc import Iterable

from tunewise.callbacks._base import Callback
from tunewise.callbacks._registry import create


class CallbackList(Callback):
    """Tells each of ``callbacks`` (instances or :func:`~tunewise.callbacks.create` names) every call, in
    order."""

    def __init__(self, callbacks: Iterable[Callback | str] = ()):
        self.callbacks = [create(c) for c in callbacks]

    def phase(self, text: str) -> None:
        for c in self.callbacks:
            c.phase(text)

    def tuning_started(self, model, budget) -> None:
        for c in self.callbacks:
            c.tuning_started(model, budget)

    def slot_phase(self, snapshot, task: int, phase: str) -> None:
        for c in self.callbacks:
            c.slot_phase(snapshot, task, phase)

    def slot_recorded(self, event, snapshot) -> None:
        for c in self.callbacks:
            c.slot_recorded(event, snapshot)

    def model_measured(self, point, snapshot) -> None:
        for c in self.callbacks:
            c.model_measured(point, snapshot)

    def tuning_finished(self) -> None:
        for c in self.callbacks:
            c.tuning_finished()
