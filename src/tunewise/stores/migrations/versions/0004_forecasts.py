"""The model-latency forecast made after each slot (JSON, NULL: none).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.add_column(sa.Column("forecast", sa.Text()))


def downgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.drop_column("forecast")
