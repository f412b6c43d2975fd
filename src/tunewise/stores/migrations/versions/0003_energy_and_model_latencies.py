"""The energy of each slot (and of its search, build and measure phases) and the proposals a filter skipped
in it, and the whole-model latencies measured while tuning.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.add_column(sa.Column("joules", sa.Float()))
        batch.add_column(sa.Column("skipped", sa.Integer(), nullable=False, server_default="0"))
        for phase in ("search", "build", "measure"):
            batch.add_column(sa.Column(f"{phase}_joules", sa.Float()))
    op.create_table(
        "model_latencies",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("run_id", _ID, sa.ForeignKey("runs.id"), nullable=False, index=True),
        sa.Column("elapsed", sa.Float(), nullable=False),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("latency", sa.Float()),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("joules", sa.Float()),
        sa.Column("message", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("model_latencies")
    with op.batch_alter_table("checkpoints") as batch:
        for phase in ("search", "build", "measure"):
            batch.drop_column(f"{phase}_joules")
        batch.drop_column("skipped")
        batch.drop_column("joules")
