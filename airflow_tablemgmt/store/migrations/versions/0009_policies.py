"""Fleet policies (issue 39): ``tms_policy``.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28

One row per maintenance policy (``core/policies.py``): its validated spec as JSON, who may change it
(``managed_by``: ``code`` for a policy of a declarations file, named by ``source``; ``store`` for one applied
through REST or the CLI) and when. Nothing existing changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tms_policy",
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column(
            "spec",
            sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql"),
            nullable=False,
        ),
        sa.Column("managed_by", sa.String(8), nullable=False),
        sa.Column("source", sa.String(1024), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_tms_policy"),
    )


def downgrade() -> None:
    op.drop_table("tms_policy")
