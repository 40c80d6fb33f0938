"""tms_process.lease_acquired_at: when the process's attempt took the table's lease.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25

The History tab and ``tablemgmt processes`` show the time a process waited for the table's lease
apart from the rest of its wait (issue 29): the lease wait is ``created_at`` to this stamp.
Nullable: rows from before this revision, actions that take no lease (compute-stats) and attempts
that have not taken it yet have none.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tms_process") as batch:
        batch.add_column(sa.Column("lease_acquired_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tms_process") as batch:
        batch.drop_column("lease_acquired_at")
