"""A callback that keeps every recorded slot."""

from __future__ import annotations

from tunewise.callbacks._base import Callback


class SlotLog(Callback):
    """Keeps ``(event, snapshot)`` for every recorded slot, in order (:attr:`slots`; :attr:`events`).

    >>> log = SlotLog()
    >>> parts = SessionParts(callbacks=[log])
    >>> session = Session(model, scheduler, budget, measurer, store, run, parts)  # doctest: +SKIP
    """

    def __init__(self):
        self.slots: list[tuple[object, object]] = []

    @property
    def events(self) -> list:
        """The :class:`~tunewise.callbacks.SlotEvent` of every recorded slot."""
        return [event for event, _ in self.slots]

    def slot_recorded(self, event, snapshot) -> None:
        self.slots.append((event, snapshot))
