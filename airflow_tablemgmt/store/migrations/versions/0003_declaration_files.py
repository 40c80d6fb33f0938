"""tms_declaration_file: one row per declarations file, what its last sync wrote.

Revision ID: 0003
Revises: 0001
Create Date: 2026-11-23

Lets a DAG-file parse skip loading and validating a declarations file whose bytes did not change
since it was synced into the store (issue 12). Written by hand, with literal types.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0001"
branch_labels = None
depends_on = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "tms_declaration_file",
        sa.Column("source", sa.String(1024), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("context", sa.String(64), nullable=False),
        sa.Column("declares_tables", sa.Boolean(), nullable=False),
        sa.Column("catalogs", _json(), nullable=False),
        sa.Column("entries", _json(), nullable=False),
        sa.Column("errors", _json(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("source", name="pk_tms_declaration_file"),
    )


def downgrade() -> None:
    op.drop_table("tms_declaration_file")
