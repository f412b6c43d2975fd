"""What a whole-model check timed besides what it read: its model's own median time and its ratio to the
previous check's model in the same rounds (NULL: not recorded, or no previous check).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_latencies") as batch:
        batch.add_column(sa.Column("timed", sa.Float()))
        batch.add_column(sa.Column("to_previous", sa.Float()))


def downgrade() -> None:
    with op.batch_alter_table("model_latencies") as batch:
        batch.drop_column("to_previous")
        batch.drop_column("timed")
