"""Tuning stores: every run, task, measured trial, checkpoint and artifact, chosen by URL.

``sqlite:///tunewise.db`` (the default, in the working directory) is an embedded store for one machine;
``postgresql+psycopg://user:password@host/database`` a store shared by several tuners or machines (messages
show its URL through :func:`display_url`, password hidden). Every
backend follows the contract of :class:`Store`. :class:`StoreDatabase` (MetaSchedule's database interface
over a store) and the JSON import/export need TVM and are imported on first use.

>>> store = create("sqlite://")  # in memory
>>> create(store) is store
True
>>> store.get_runs()
[]
"""

from __future__ import annotations

import importlib

from tunewise.stores._base import (
    DEAD,
    FAILED,
    FINISHED,
    FROM_BASE,
    HEARTBEAT_INTERVAL,
    HEARTBEAT_STALE,
    IMPORTED,
    INTERRUPTED,
    RUNNING,
    SUSPENDED,
    TUNED,
    Artifact,
    Checkpoint,
    ModelLatency,
    Run,
    Store,
    StoredTask,
    StoredTrial,
    ranking_latency,
)
from tunewise.stores._sqlalchemy import SQLAlchemyStore
from tunewise.stores._url import display_url, hide_secrets

__all__ = [
    "DEAD",
    "DEFAULT_URL",
    "FAILED",
    "HEARTBEAT_INTERVAL",
    "HEARTBEAT_STALE",
    "FINISHED",
    "FROM_BASE",
    "IMPORTED",
    "INTERRUPTED",
    "RUNNING",
    "SUSPENDED",
    "TUNED",
    "Artifact",
    "Checkpoint",
    "ModelLatency",
    "Run",
    "SQLAlchemyStore",
    "Store",
    "StoreDatabase",
    "StoredTask",
    "StoredTrial",
    "create",
    "display_url",
    "export_records",
    "hide_secrets",
    "import_records",
    "ranking_latency",
]

DEFAULT_URL = "sqlite:///tunewise.db"

_LAZY = {"StoreDatabase": "tunewise.stores._database", "export_records": "tunewise.stores._exchange",
         "import_records": "tunewise.stores._exchange"}


def create(url: str | Store | None = None, *, must_exist: bool = False, read_only: bool = False) -> Store:
    """The store at ``url`` (default :data:`DEFAULT_URL`), created and migrated when needed; a
    :class:`Store` is returned unchanged. ``must_exist`` refuses to create a new SQLite file; ``read_only``
    opens an existing store at the current schema without ever writing to it.

    Raises :class:`~tunewise.errors.InputError` on a malformed URL or a missing driver, and its subclass
    :class:`~tunewise.errors.StoreError` on an unreachable server or a database that is not a usable store.
    """
    if isinstance(url, Store):
        return url
    return SQLAlchemyStore(url or DEFAULT_URL, must_exist=must_exist, read_only=read_only)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tunewise.stores' has no attribute {name!r}")
