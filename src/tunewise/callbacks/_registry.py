"""Callbacks by name: what :func:`create` builds."""

from __future__ import annotations

from tunewise import _factory
from tunewise.callbacks._base import Callback
from tunewise.callbacks._slot_log import SlotLog


def _live_progress() -> type:
    from tunewise.callbacks._progress import LiveProgress

    return LiveProgress


_REGISTRY = {"progress": _live_progress, "slot-log": lambda: SlotLog}


def names() -> list[str]:
    """The names :func:`create` accepts."""
    return list(_REGISTRY)


def create(name: str | Callback, **kwargs: object) -> Callback:
    """The callback called ``name``, built with ``kwargs``; an instance is returned unchanged.

    Raises :class:`~tunewise.errors.InputError` on an unknown name, an argument the callback does not take
    (the message lists the valid ones), or a bad value.
    """
    return _factory.create("callback", _REGISTRY, name, kwargs, Callback)
