"""The store on a SQL database through SQLAlchemy: SQLite (embedded, the default) or PostgreSQL (shared).

SQLite runs in WAL mode with ``synchronous=NORMAL``: a committed transaction survives the process being
killed (not necessarily a power cut). Writers take the database lock when their transaction begins
(``BEGIN IMMEDIATE``) and wait up to a minute for it, so concurrent writers queue instead of failing on a
lock upgrade. On PostgreSQL, workload commits and migrations serialise on advisory locks.

The schema is created and upgraded by the alembic migrations in ``migrations/`` when a store is opened for
writing; a store opened ``read_only`` is never written (SQLite's ``query_only``, PostgreSQL's read-only
transactions), so it must be a tunewise store at the current schema already. Database errors a user can
meet (a file that is not a database or is corrupt, a full disk, a lock held too long, a lost server) are
raised as :class:`~tunewise.errors.StoreError`. A process writing to a SQLite file holds a little disk space
beside it until it closes the store, and gives it up when the disk is full, so that a run's status (``failed``)
can still be written.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence

from sqlalchemy import event, func, inspect, or_, select, update
from sqlalchemy.engine import Connection, Engine, create_engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, OperationalError

from tunewise import infinity
from tunewise.errors import InputError, RunBusyError, StoreError, message_line
from tunewise.forecast import Forecast
from tunewise.stores import _base
from tunewise.stores import _schema as s
from tunewise.stores._base import (
    RUNNING,
    Artifact,
    Checkpoint,
    ModelLatency,
    Run,
    Store,
    StoredTask,
    StoredTrial,
    ranking_latency,
)
from tunewise.stores._url import display_url, hide_secrets

_SCHEMES = {"sqlite": "sqlite:///PATH", "postgresql": "postgresql+psycopg://USER:PASSWORD@HOST/DATABASE"}
"""The databases a store may be on (SQLAlchemy backend names), each with the form of its URL."""
_RESERVE_BYTES = 128 * 1024  # a few small transactions' pages and write-ahead log frames
_PHASE_JOULES = ("search_joules", "build_joules", "measure_joules")
_MIGRATIONS = os.path.join(os.path.dirname(__file__), "migrations")
_MIGRATION_LOCK = 0x7475_6E65  # PostgreSQL advisory lock key of schema upgrades


def _lock(conn: Connection, key: int) -> None:
    """Hold a lock on ``key`` until the transaction ends (SQLite writers already hold the database's)."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(key)))


def alembic_config(connection: Connection):
    """An alembic ``Config`` that runs the store's migrations on ``connection``."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", _MIGRATIONS)
    config.attributes["connection"] = connection
    return config


def _revisions(conn: Connection) -> tuple[str | None, str]:
    """``(the database's schema revision, the newest one)``; the database's is ``None`` when it has none.

    Raises :class:`~tunewise.errors.StoreError` for a database that holds tables but no tunewise schema.
    """
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config(conn)).get_current_head()
    current = MigrationContext.configure(conn).get_current_revision()
    if current is None and inspect(conn).get_table_names():
        raise StoreError(f"{display_url(conn.engine.url)} is not a tunewise store (it holds another program's tables)")
    return current, head


def upgrade(engine: Engine) -> None:
    """Create the schema, or upgrade it to the newest migration; a no-op when it is current."""
    from alembic import command

    with engine.connect() as conn:
        current, head = _revisions(conn)
        if current == head:
            return
    with engine.execution_options(tunewise_write=True).begin() as conn:
        _lock(conn, _MIGRATION_LOCK)
        current, head = _revisions(conn)
        if current != head:
            command.upgrade(alembic_config(conn), "head")


def check_current(engine: Engine) -> None:
    """Raise :class:`~tunewise.errors.StoreError` unless the database holds the current tunewise schema."""
    with engine.connect() as conn:
        current, head = _revisions(conn)
    if current is None:
        raise StoreError(f"{display_url(engine.url)} is not a tunewise store (it is empty)")
    if current != head:
        raise StoreError(f"the store {display_url(engine.url)} has an older schema; a command that writes to it "
                         "(tunewise tune, tunewise records import) upgrades it")


def _user_errors(engine: Engine) -> None:
    """Raise the database errors a user can meet (and fix) as :class:`~tunewise.errors.StoreError`."""

    @event.listens_for(engine, "handle_error")
    def _handle(context):
        err = context.sqlalchemy_exception
        if isinstance(err, OperationalError) or type(err) is DatabaseError:
            raise StoreError(f"cannot use the store {display_url(engine.url)}: {message_line(err.orig)}") from None


def _sqlite_engine(url, read_only: bool) -> Engine:
    engine = create_engine(url, connect_args={"timeout": 60})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None  # transactions are begun below, DDL included
        cursor = dbapi_connection.cursor()
        if read_only:
            cursor.execute("PRAGMA query_only=ON")
        elif url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("tunewise_write") else "BEGIN")

    return engine


def _engine(url: str, must_exist: bool, read_only: bool) -> Engine:
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise InputError(f"bad store URL {display_url(url)!r}: expected e.g. sqlite:///tunewise.db or "
                         "postgresql+psycopg://user:password@host/database") from None
    if parsed.get_backend_name() not in _SCHEMES:
        raise InputError(f"store URL {display_url(url)!r} has the scheme {parsed.drivername}:, which tunewise does "
                         f"not take: give {' or '.join(_SCHEMES.values())}")
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")  # the driver tunewise installs
    try:
        if parsed.get_backend_name() == "sqlite":
            path = parsed.database or ""
            if must_exist and not os.path.isfile(path):
                raise InputError(f"no store at {path or 'memory'}: tune something first, or pass --store")
            if path not in ("", ":memory:") and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
                raise InputError(f"no folder for the store {path} (an absolute path takes four slashes: "
                                 "sqlite:////path/to/tunewise.db)")
            return _sqlite_engine(parsed, read_only)
        options = {"connect_args": {"options": "-c default_transaction_read_only=on"}} if read_only else {}
        return create_engine(parsed, pool_pre_ping=True, **options)
    except (NoSuchModuleError, ImportError) as err:
        raise InputError(f"store URL {display_url(url)!r} needs a database driver that is not installed: "
                         f"{hide_secrets(str(err), url)}") from None


class _Reserve:
    """Disk space a process writing to the SQLite file at ``path`` (``None``: none) holds beside it
    (``PATH-reserve-HOST-PID-TAG``, :data:`_RESERVE_BYTES`), so that the write that records a run's end still
    fits when the disk fills: :meth:`give_up` frees it. The reserves of this host's processes that no longer
    exist are removed."""

    def __init__(self, path: str | None):
        self.path, self._pid = None, os.getpid()
        if path is None:
            return
        prefix = f"{path}-reserve-{socket.gethostname()}-"
        for stale in glob.glob(f"{glob.escape(prefix)}*"):
            with contextlib.suppress(ValueError, OSError):
                if _base.owner_gone(f"pid {int(stale[len(prefix):].split('-')[0])} on {socket.gethostname()} (0)"):
                    os.remove(stale)
        reserve = f"{prefix}{self._pid}-{uuid.uuid4().hex[:8]}"
        try:
            with open(reserve, "wb") as f:
                f.write(bytes(_RESERVE_BYTES))
                f.flush()
                os.fsync(f.fileno())
            self.path = reserve
        except OSError:  # no room for it: the disk is full already
            with contextlib.suppress(OSError):
                os.remove(reserve)

    def give_up(self) -> bool:
        """Free the space (in the process that holds it); whether there was any."""
        if self.path is None or os.getpid() != self._pid:
            return False
        with contextlib.suppress(OSError):
            os.remove(self.path)
        self.path = None
        return True


class SQLAlchemyStore(Store):
    """A :class:`~tunewise.stores.Store` on the database at ``url`` (created and migrated when needed).

    ``must_exist`` refuses to create a SQLite file that is not there; ``read_only`` (for commands that only
    read; implies ``must_exist``) never writes, and refuses a database without the current schema.

    >>> store = SQLAlchemyStore("sqlite://")  # in memory
    >>> run = store.create_run("tiny-mlp", '{"kind": "llvm"}', "gradient", {"trials": 8})
    >>> store.get_run(run).settings
    {'trials': 8}
    """

    def __init__(self, url: str, *, must_exist: bool = False, read_only: bool = False):
        self.url = url
        self._engine = _engine(url, must_exist or read_only, read_only)
        try:
            (check_current if read_only else upgrade)(self._engine)
        except DatabaseError as err:  # unreachable server, bad connection options, not a database
            raise StoreError(f"cannot open the store {display_url(url)!r}: "
                             f"{hide_secrets(message_line(err.orig), url)}") from None
        _user_errors(self._engine)
        self._writer = self._engine.execution_options(tunewise_write=True)
        file_backed = self._engine.dialect.name == "sqlite" and self._engine.url.database not in (None, "", ":memory:")
        self._reserve = _Reserve(self._engine.url.database if file_backed and not read_only else None)

    def __repr__(self) -> str:
        return f"SQLAlchemyStore({display_url(self.url)!r})"

    def close(self) -> None:
        self._engine.dispose()
        self._reserve.give_up()

    # -- runs ------------------------------------------------------------------------------------------
    def create_run(self, model: str, target: str, scheduler: str, settings: Mapping, *,
                   status: str = RUNNING, owner: str | None = None) -> int:
        now = time.time()
        with self._writer.begin() as conn:
            return conn.execute(s.runs.insert().values(
                model=model, target=target, scheduler=scheduler, settings=json.dumps(settings), status=status,
                created=now, updated=now, owner=owner, heartbeat=None if owner is None else now)
            ).inserted_primary_key[0]

    @staticmethod
    def _run(row) -> Run:
        return Run(id=row.id, model=row.model, target=row.target, scheduler=row.scheduler,
                   settings=json.loads(row.settings), status=row.status, created=row.created, updated=row.updated,
                   owner=row.owner, heartbeat=row.heartbeat)

    def get_run(self, run: int) -> Run:
        with self._engine.connect() as conn:
            row = conn.execute(select(s.runs).where(s.runs.c.id == run)).first()
        if row is None:
            raise InputError(f"no run {run} in the store {display_url(self.url)}")
        return self._run(row)

    def get_runs(self) -> list[Run]:
        with self._engine.connect() as conn:
            return [self._run(row) for row in conn.execute(select(s.runs).order_by(s.runs.c.id))]

    def set_status(self, run: int, status: str) -> None:
        try:
            self._update(run, status=status, updated=time.time())
        except StoreError:
            if not self._reserve.give_up():
                raise
            self._update(run, status=status, updated=time.time())

    def _update(self, run: int, **values) -> None:
        with self._writer.begin() as conn:
            if not conn.execute(update(s.runs).where(s.runs.c.id == run).values(**values)).rowcount:
                raise InputError(f"no run {run} in the store {display_url(self.url)}")

    def update_settings(self, run: int, changes: Mapping) -> None:
        with self._writer.begin() as conn:
            settings = conn.execute(select(s.runs.c.settings).where(s.runs.c.id == run).with_for_update()).scalar()
            if settings is None:
                raise InputError(f"no run {run} in the store {display_url(self.url)}")
            conn.execute(update(s.runs).where(s.runs.c.id == run).values(
                settings=json.dumps({**json.loads(settings), **changes}), updated=time.time()))

    # -- ownership -------------------------------------------------------------------------------------
    def claim_run(self, run: int, owner: str, *, stale_after: float | None = None,
                  gone: str | None = None) -> None:
        now = time.time()
        stale = now - (_base.HEARTBEAT_STALE if stale_after is None else stale_after)
        c = s.runs.c
        with self._writer.begin() as conn:
            if conn.execute(update(s.runs).where(
                    c.id == run, or_(c.owner.is_(None), c.owner == owner, c.heartbeat.is_(None), c.heartbeat < stale,
                                     c.owner == gone))
                    .values(owner=owner, heartbeat=now)).rowcount:
                return
            row = conn.execute(select(c.owner, c.heartbeat).where(c.id == run)).first()
        if row is None:
            raise InputError(f"no run {run} in the store {display_url(self.url)}")
        raise RunBusyError(f"run {run} is being tuned by another process ({row.owner}, alive "
                           f"{now - row.heartbeat:.0f}s ago); wait until it ends, or stop it first")

    def beat(self, run: int, owner: str) -> bool:
        with self._writer.begin() as conn:
            return bool(conn.execute(update(s.runs).where(s.runs.c.id == run, s.runs.c.owner == owner)
                                     .values(heartbeat=time.time())).rowcount)

    def release_run(self, run: int, owner: str) -> None:
        with self._writer.begin() as conn:
            conn.execute(update(s.runs).where(s.runs.c.id == run, s.runs.c.owner == owner)
                         .values(owner=None, heartbeat=None))

    # -- workloads -------------------------------------------------------------------------------------
    def commit_workload(self, shash: str, mod: str, equal: Callable[[str], bool]) -> int:
        with self._writer.begin() as conn:
            _lock(conn, int(shash, 16) - (1 << 63))  # the lock key is a signed 64-bit integer
            for row in conn.execute(select(s.workloads.c.id, s.workloads.c.mod)
                                    .where(s.workloads.c.shash == shash).order_by(s.workloads.c.id)):
                if equal(row.mod):
                    return row.id
            return conn.execute(s.workloads.insert().values(shash=shash, mod=mod)).inserted_primary_key[0]

    def get_workloads(self, shash: str) -> list[tuple[int, str]]:
        with self._engine.connect() as conn:
            return [(row.id, row.mod) for row in conn.execute(
                select(s.workloads.c.id, s.workloads.c.mod).where(s.workloads.c.shash == shash)
                .order_by(s.workloads.c.id))]

    def get_workload(self, workload: int) -> tuple[str, str]:
        with self._engine.connect() as conn:
            row = conn.execute(select(s.workloads).where(s.workloads.c.id == workload)).one()
        return row.shash, row.mod

    # -- tasks, trials, checkpoints --------------------------------------------------------------------
    def add_tasks(self, run: int, tasks: Sequence[StoredTask]) -> None:
        with self._writer.begin() as conn:
            conn.execute(s.tasks.insert(), [
                {"run_id": run, "task_index": t.index, "name": t.name, "workload_id": t.workload,
                 "weight": t.weight, "flops": t.flops, "default_latency": infinity.to_json(t.default_latency)}
                for t in tasks])

    def get_tasks(self, run: int) -> list[StoredTask]:
        with self._engine.connect() as conn:
            return [StoredTask(index=row.task_index, name=row.name, workload=row.workload_id, weight=row.weight,
                               flops=row.flops, default_latency=infinity.from_json(row.default_latency))
                    for row in conn.execute(select(s.tasks).where(s.tasks.c.run_id == run)
                                            .order_by(s.tasks.c.task_index))]

    def add_trials(self, run: int, trials: Sequence[StoredTrial], checkpoint: Checkpoint | None = None, *,
                   owner: str | None = None) -> None:
        rows = [{"run_id": run, "task_index": t.task, "slot": t.slot, "workload_id": t.workload,
                 "target": t.target, "record": t.record, "candidate": t.candidate,
                 "run_secs": json.dumps(list(t.run_secs)), "latency": ranking_latency(t.record, t.run_secs),
                 "error": t.error, "message": t.message, "build_seconds": t.build_seconds,
                 "run_seconds": t.run_seconds, "timestamp": t.timestamp, "origin": t.origin} for t in trials]
        with self._writer.begin() as conn:
            if owner is not None and not conn.execute(
                    update(s.runs).where(s.runs.c.id == run, s.runs.c.owner == owner)
                    .values(heartbeat=time.time())).rowcount:
                raise RunBusyError(f"run {run} was taken over by another process; this one stops")
            if rows:
                conn.execute(s.trials.insert(), rows)
            if checkpoint is not None:
                c = checkpoint
                conn.execute(s.checkpoints.insert().values(
                    run_id=run, slot=c.slot, task_index=c.task, trials=c.trials, elapsed=c.elapsed,
                    seconds=c.seconds, latency=infinity.to_json(c.latency), joules=c.joules, skipped=c.skipped,
                    forecast=None if c.forecast is None else json.dumps(c.forecast.to_json()),
                    **dict(zip(_PHASE_JOULES, c.phase_joules or (None, None, None), strict=True))))
            conn.execute(update(s.runs).where(s.runs.c.id == run).values(updated=time.time()))

    @staticmethod
    def _trial(row, records: bool = True) -> StoredTrial:
        return StoredTrial(workload=row.workload_id, record=row.record if records else None,
                           run_secs=tuple(json.loads(row.run_secs)), error=row.error, message=row.message,
                           task=row.task_index, slot=row.slot, target=row.target, candidate=row.candidate,
                           build_seconds=row.build_seconds, run_seconds=row.run_seconds, timestamp=row.timestamp,
                           origin=row.origin)

    def get_trials(self, run: int | None = None, *, records: bool = True) -> list[StoredTrial]:
        columns = [c for c in s.trials.c if records or c.name != "record"]
        query = select(*columns).order_by(s.trials.c.id)
        if run is not None:
            query = query.where(s.trials.c.run_id == run)
        with self._engine.connect() as conn:
            return [self._trial(row, records) for row in conn.execute(query)]

    def top_trials(self, workload: int, k: int, target: str | None = None) -> list[StoredTrial]:
        query = (select(s.trials).where(s.trials.c.workload_id == workload, s.trials.c.latency.is_not(None))
                 .order_by(s.trials.c.latency, s.trials.c.id).limit(k))
        if target is not None:
            query = query.where(s.trials.c.target == target)
        with self._engine.connect() as conn:
            return [self._trial(row) for row in conn.execute(query)]

    def ranked_workloads(self, target: str | None = None) -> list[int]:
        query = select(s.trials.c.workload_id).where(s.trials.c.latency.is_not(None)).distinct()
        if target is not None:
            query = query.where(s.trials.c.target == target)
        with self._engine.connect() as conn:
            return sorted(row.workload_id for row in conn.execute(query))

    def count_trials(self) -> int:
        with self._engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(s.trials)).scalar_one()

    def get_checkpoints(self, run: int) -> list[Checkpoint]:
        with self._engine.connect() as conn:
            return [Checkpoint(slot=row.slot, task=row.task_index, trials=row.trials, elapsed=row.elapsed,
                               seconds=row.seconds, latency=infinity.from_json(row.latency), joules=row.joules,
                               skipped=row.skipped,
                               phase_joules=(None if row.search_joules is None
                                             else tuple(getattr(row, c) for c in _PHASE_JOULES)),
                               forecast=None if row.forecast is None else Forecast.from_json(json.loads(row.forecast)))
                    for row in conn.execute(select(s.checkpoints).where(s.checkpoints.c.run_id == run)
                                            .order_by(s.checkpoints.c.id))]

    def add_model_latency(self, run: int, point: ModelLatency) -> None:
        with self._writer.begin() as conn:
            conn.execute(s.model_latencies.insert().values(
                run_id=run, elapsed=point.elapsed, trials=point.trials, latency=infinity.to_json(point.latency),
                seconds=point.seconds, joules=point.joules, message=point.message, timed=point.timed,
                to_previous=point.to_previous))

    def get_model_latencies(self, run: int) -> list[ModelLatency]:
        with self._engine.connect() as conn:
            return [ModelLatency(elapsed=row.elapsed, trials=row.trials, latency=infinity.from_json(row.latency),
                                 seconds=row.seconds, joules=row.joules, message=row.message, timed=row.timed,
                                 to_previous=row.to_previous)
                    for row in conn.execute(select(s.model_latencies).where(s.model_latencies.c.run_id == run)
                                            .order_by(s.model_latencies.c.id))]

    # -- artifacts -------------------------------------------------------------------------------------
    def add_artifact(self, run: int, path: str, metadata: Mapping) -> None:
        with self._writer.begin() as conn:
            conn.execute(s.artifacts.insert().values(run_id=run, path=path, metadata=json.dumps(metadata),
                                                     created=time.time()))

    def get_artifacts(self, run: int) -> list[Artifact]:
        with self._engine.connect() as conn:
            return [Artifact(row.path, json.loads(row.metadata), row.created)
                    for row in conn.execute(select(s.artifacts).where(s.artifacts.c.run_id == run)
                                            .order_by(s.artifacts.c.id))]

