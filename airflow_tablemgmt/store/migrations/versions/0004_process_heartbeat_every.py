"""tms_process.heartbeat_every_s: the heartbeat interval the process's worker promised.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25

The reaper and a worker deciding on a takeover judge a row by the interval its own worker beats at
(issue 23, item 2): a worker configured with a slower heartbeat than the reaper's defaults assume is
not declared lost between two of its beats. Nullable: rows from before this revision, and PENDING
rows, have none (they are judged by ``stale_after`` alone).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tms_process") as batch:
        batch.add_column(sa.Column("heartbeat_every_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tms_process") as batch:
        batch.drop_column("heartbeat_every_s")
