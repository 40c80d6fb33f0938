"""Enrolment by policy (issue 39): ``tms_table.policy`` and ``tms_enrolment``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28

* ``tms_table.policy``: the policy whose discovery enrolled the table (its ``managed_by`` is ``policy``);
  null for a table declared in a file or registered through REST or the CLI;
* ``tms_enrolment``: every change discovery made — a table enrolled, retired (soft-deleted, its process
  history kept), re-enrolled, or its settings updated — with when, which policy and why.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_TABLE_ID = 3 * 128 + 2
_POLICY = 63


def upgrade() -> None:
    with op.batch_alter_table("tms_table") as batch:
        batch.add_column(sa.Column("policy", sa.String(_POLICY), nullable=True))
    op.create_table(
        "tms_enrolment",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("policy", sa.String(_POLICY), nullable=False),
        sa.Column("table_id", sa.String(_TABLE_ID), nullable=False),
        sa.Column("change", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tms_enrolment"),
    )
    op.create_index("ix_tms_enrolment_at", "tms_enrolment", ["at"])
    op.create_index("ix_tms_enrolment_table_id_at", "tms_enrolment", ["table_id", "at"])
    op.create_index("ix_tms_enrolment_policy_at", "tms_enrolment", ["policy", "at"])


def downgrade() -> None:
    op.drop_table("tms_enrolment")
    with op.batch_alter_table("tms_table") as batch:
        batch.drop_column("policy")
