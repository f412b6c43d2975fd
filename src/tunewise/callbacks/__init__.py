"""Callbacks: what watches a tuning run (MetaSchedule's ``measure_callback``), as a list of small objects.

Every callback follows the contract of :class:`Callback`; :class:`~tunewise.tuning.session.Session`,
:func:`tunewise.tune`, :func:`tunewise.resume` and :func:`tunewise.job.prepare.prepare_run` take
``callbacks=[...]`` (instances or names). :func:`create` builds one from its name:

- ``"progress"``: the live display of ``tunewise tune`` (:class:`LiveProgress`, whose module imports rich on
  first use);
- ``"slot-log"``: keeps every recorded slot (:class:`SlotLog`).

:class:`CallbackList` tells several as one.

>>> log = create("slot-log")
>>> create(log) is log
True
"""

from __future__ import annotations

from tunewise.callbacks._base import Callback
from tunewise.callbacks._events import SlotEvent
from tunewise.callbacks._list import CallbackList
from tunewise.callbacks._registry import create, names
from tunewise.callbacks._slot_log import SlotLog

__all__ = ["Callback", "CallbackList", "SlotEvent", "SlotLog", "create", "names"]
