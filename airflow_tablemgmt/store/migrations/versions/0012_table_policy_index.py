"""Fleet planning (issue 40, ADR 0004): an index on ``tms_table (policy, table_id)``.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28

The planning step of a (policy, action) DAG reads the policy's enrolled tables with their stored health in
one query (``store/planning.py``); the index finds them without scanning every table, in table-id order.
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_tms_table_policy_table_id", "tms_table", ["policy", "table_id"])


def downgrade() -> None:
    op.drop_index("ix_tms_table_policy_table_id", table_name="tms_table")
