"""Runs, workloads, tasks, trials, checkpoints and artifacts.

Revision ID: 0001
Revises:
Create Date: 2026-05-20
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("scheduler", sa.String(200), nullable=False),
        sa.Column("settings", sa.Text(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("created", sa.Float(), nullable=False),
        sa.Column("updated", sa.Float(), nullable=False),
    )
    op.create_table(
        "workloads",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("shash", sa.String(16), nullable=False),
        sa.Column("mod", sa.Text(), nullable=False),
    )
    op.create_index("ix_workloads_shash", "workloads", ["shash"])
    op.create_table(
        "tasks",
        sa.Column("run_id", _ID, sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("task_index", sa.Integer(), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("workload_id", _ID, sa.ForeignKey("workloads.id"), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("flops", sa.Float(), nullable=False),
        sa.Column("default_latency", sa.Float()),
    )
    op.create_table(
        "trials",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("run_id", _ID, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("task_index", sa.Integer()),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("workload_id", _ID, sa.ForeignKey("workloads.id"), nullable=False),
        sa.Column("target", sa.Text()),
        sa.Column("record", sa.Text(), nullable=False),
        sa.Column("candidate", sa.String(16)),
        sa.Column("run_secs", sa.Text(), nullable=False),
        sa.Column("latency", sa.Float()),
        sa.Column("error", sa.String(20)),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("build_seconds", sa.Float(), nullable=False),
        sa.Column("run_seconds", sa.Float(), nullable=False),
        sa.Column("timestamp", sa.Float(), nullable=False),
    )
    op.create_index("ix_trials_run_id", "trials", ["run_id"])
    op.create_index("ix_trials_workload_latency", "trials", ["workload_id", "latency"])
    op.create_table(
        "checkpoints",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("run_id", _ID, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("task_index", sa.Integer(), nullable=False),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("elapsed", sa.Float(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("latency", sa.Float()),
    )
    op.create_index("ix_checkpoints_run_id", "checkpoints", ["run_id"])
    op.create_table(
        "artifacts",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("run_id", _ID, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("created", sa.Float(), nullable=False),
    )
    op.create_index("ix_artifacts_run_id", "artifacts", ["run_id"])


def downgrade() -> None:
    for table in ("artifacts", "checkpoints", "trials", "tasks", "workloads", "runs"):
        op.drop_table(table)
