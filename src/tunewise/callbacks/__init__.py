"""Callbacks: what watches a tuning run (MetaSchedule's ``measure_callback``), as a list of small objects.

Every callback follows the contract of :class:`Callback`; :class:`~tunewise.session.Session`,
:func:`tunewise.tune`, :func:`tunewise.resume` and :func:`tunewise.prepare.prepare_run` take
``callbacks=[...]`` (instances or names). :func:`create` builds one from its name:

- ``"progress"``: the live display of ``tunewise tune`` (:class:`tunewise.progress.LiveProgress`, imported
  on first use);
- ``"slot-log"``: keeps every recorded slot (:class:`SlotLog`).

:class:`CallbackList` tells several as one.

>>> log = create("slot-log")
>>> create(log) is log
True
"""

from __future__ import annotations

from tunewise import _factory
from tunewise.callbacks._base import Callback
from tunewise.callbacks._list import CallbackList
from tunewise.callbacks._slot_log import SlotLog

__all__ = ["Callback", "CallbackList", "SlotLog", "create", "names"]


def _live_progress() -> type:
    from tunewise.progress import LiveProgress

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
