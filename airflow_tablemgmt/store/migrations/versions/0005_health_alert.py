"""tms_health_alert: whether each table's health score is below a notification threshold.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

The ``unhealthy`` notification (issue 28) is sent once when a table's score crosses below the threshold,
and again only after it has recovered: the last state per (table, threshold) lives here, and the worker
whose guarded update flips it is the one that sends, so two workers measuring the same table never both do.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tms_health_alert",
        sa.Column("table_id", sa.String(3 * 128 + 2), nullable=False),
        sa.Column("threshold", sa.Integer(), nullable=False),
        sa.Column("below", sa.Boolean(), nullable=False),
        sa.Column("score", sa.Integer(), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("table_id", "threshold", name="pk_tms_health_alert"),
    )


def downgrade() -> None:
    op.drop_table("tms_health_alert")
