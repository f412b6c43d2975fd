"""Where a trial's schedule came from when it was not the run's own search or sharing: ``base`` for a record
base's record (NULL: the run's own).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("origin", sa.String(20)))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("origin")
