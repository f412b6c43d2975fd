"""The store's tables (SQLAlchemy Core). Changing them needs a migration in ``migrations/versions``."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, ForeignKey, Index, Integer, MetaData, String, Table, Text

METADATA = MetaData()

# trial ids can outgrow 32 bits in a long-lived shared store; SQLite needs INTEGER for its row id
_ID = BigInteger().with_variant(Integer(), "sqlite")

runs = Table(
    "runs", METADATA,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("model", Text, nullable=False),
    Column("target", Text, nullable=False),
    Column("scheduler", String(200), nullable=False),
    Column("settings", Text, nullable=False),  # JSON object
    Column("status", String(20), nullable=False),
    Column("created", Float, nullable=False),
    Column("updated", Float, nullable=False),
    Column("owner", String(200)),  # the process tuning the run (NULL: none)
    Column("heartbeat", Float),  # the owner's last sign of life
)

workloads = Table(
    "workloads", METADATA,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("shash", String(16), nullable=False, index=True),
    Column("mod", Text, nullable=False),  # tvm.ir.save_json of the TIR module
)

tasks = Table(
    "tasks", METADATA,
    Column("run_id", _ID, ForeignKey("runs.id"), primary_key=True),
    Column("task_index", Integer, primary_key=True),
    Column("name", Text, nullable=False),
    Column("workload_id", _ID, ForeignKey("workloads.id"), nullable=False),
    Column("weight", Integer, nullable=False),
    Column("flops", Float, nullable=False),
    Column("default_latency", Float),  # NULL: the default schedule failed (inf)
)

trials = Table(
    "trials", METADATA,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("run_id", _ID, ForeignKey("runs.id"), nullable=False, index=True),
    Column("task_index", Integer),  # NULL for imported records
    Column("slot", Integer, nullable=False),
    Column("workload_id", _ID, ForeignKey("workloads.id"), nullable=False),
    Column("target", Text),
    Column("record", Text, nullable=False),  # MetaSchedule's tuning-record JSON
    Column("candidate", String(16)),  # structural hash of the measured module
    Column("run_secs", Text, nullable=False),  # JSON list, empty on failure
    Column("latency", Float),  # MetaSchedule's ranking key; NULL when it ignores the record
    Column("error", String(20)),
    Column("message", Text, nullable=False),
    Column("build_seconds", Float, nullable=False),
    Column("run_seconds", Float, nullable=False),
    Column("timestamp", Float, nullable=False),
    Column("origin", String(20)),  # "base": made from a record base's record (NULL: the run's own)
    Index("ix_trials_workload_latency", "workload_id", "latency"),
)

checkpoints = Table(
    "checkpoints", METADATA,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("run_id", _ID, ForeignKey("runs.id"), nullable=False, index=True),
    Column("slot", Integer, nullable=False),
    Column("task_index", Integer, nullable=False),
    Column("trials", Integer, nullable=False),
    Column("elapsed", Float, nullable=False),
    Column("seconds", Float, nullable=False),
    Column("latency", Float),  # NULL: inf
    Column("joules", Float),  # energy the slot used (NULL: not metered)
    Column("skipped", Integer, nullable=False, server_default="0"),  # proposals a candidate filter skipped
    Column("search_joules", Float),  # the joules of the slot's phases (NULL: not metered)
    Column("build_joules", Float),
    Column("measure_joules", Float),
    Column("forecast", Text),  # JSON of the forecast made after the slot (NULL: none)
)

model_latencies = Table(
    "model_latencies", METADATA,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("run_id", _ID, ForeignKey("runs.id"), nullable=False, index=True),
    Column("elapsed", Float, nullable=False),
    Column("trials", Integer, nullable=False),
    Column("latency", Float),  # NULL: the check failed (inf)
    Column("seconds", Float, nullable=False),
    Column("joules", Float),
    Column("message", Text, nullable=False),
    Column("timed", Float),  # the model's own median time in the check (NULL: not recorded)
    Column("to_previous", Float),  # its ratio to the previous check's model in the same rounds (NULL: none)
)

artifacts = Table(
    "artifacts", METADATA,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("run_id", _ID, ForeignKey("runs.id"), nullable=False, index=True),
    Column("path", Text, nullable=False),
    Column("metadata", Text, nullable=False),  # JSON object
    Column("created", Float, nullable=False),
)
