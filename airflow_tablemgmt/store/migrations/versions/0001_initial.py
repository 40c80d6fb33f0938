"""Initial schema: tms_catalog, tms_table, tms_process, tms_lease.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Written by hand, with literal types, so it keeps creating the same schema whatever later
versions of the models look like.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID_LEN = 128
TABLE_ID_LEN = 3 * ID_LEN + 2


def _ts() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def _id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "tms_catalog",
        sa.Column("name", sa.String(ID_LEN), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("warehouse", sa.String(2048), nullable=True),
        sa.Column("properties", _json(), nullable=False),
        sa.Column("owner", sa.String(8), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.Column("updated_at", _ts(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_tms_catalog"),
    )
    op.create_table(
        "tms_table",
        sa.Column("id", _id(), autoincrement=True, nullable=False),
        sa.Column("table_id", sa.String(TABLE_ID_LEN), nullable=False),
        sa.Column("catalog", sa.String(ID_LEN), nullable=False),
        sa.Column("namespace", sa.String(ID_LEN), nullable=False),
        sa.Column("name", sa.String(ID_LEN), nullable=False),
        sa.Column("format", sa.String(32), nullable=False),
        sa.Column("owner_team", sa.String(255), nullable=False),
        sa.Column("managed_by", sa.String(8), nullable=False),
        sa.Column("queue", sa.String(ID_LEN), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("actions", _json(), nullable=False),
        sa.Column("spec", _json(), nullable=False),
        sa.Column("dynamic", _json(), nullable=True),
        sa.Column("deleted_at", _ts(), nullable=True),
        sa.Column("created_at", _ts(), nullable=False),
        sa.Column("updated_at", _ts(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tms_table"),
        sa.UniqueConstraint("table_id", name="uq_tms_table_table_id"),
    )
    op.create_table(
        "tms_process",
        sa.Column("id", _id(), autoincrement=True, nullable=False),
        sa.Column("table_id", sa.String(TABLE_ID_LEN), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("instant", _ts(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("engine", sa.String(32), nullable=False),
        sa.Column("external_id", sa.String(255), nullable=True),
        sa.Column("snapshot_id", sa.BigInteger(), nullable=True),
        sa.Column("parameters", _json(), nullable=False),
        sa.Column("summary", _json(), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("dag_id", sa.String(250), nullable=True),
        sa.Column("run_id", sa.String(250), nullable=True),
        sa.Column("task_id", sa.String(250), nullable=True),
        sa.Column("created_at", _ts(), nullable=False),
        sa.Column("started_at", _ts(), nullable=True),
        sa.Column("finished_at", _ts(), nullable=True),
        sa.Column("heartbeat_at", _ts(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_tms_process"),
        sa.UniqueConstraint("table_id", "action", "instant", name="uq_tms_process_table_id_action_instant"),
    )
    op.create_index("ix_tms_process_table_id_action_status", "tms_process", ["table_id", "action", "status"])
    op.create_index("ix_tms_process_status", "tms_process", ["status"])
    op.create_table(
        "tms_lease",
        sa.Column("table_id", sa.String(TABLE_ID_LEN), nullable=False),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("acquired_at", _ts(), nullable=False),
        sa.Column("expires_at", _ts(), nullable=False),
        sa.PrimaryKeyConstraint("table_id", name="pk_tms_lease"),
    )


def downgrade() -> None:
    op.drop_table("tms_lease")
    op.drop_index("ix_tms_process_status", table_name="tms_process")
    op.drop_index("ix_tms_process_table_id_action_status", table_name="tms_process")
    op.drop_table("tms_process")
    op.drop_table("tms_table")
    op.drop_table("tms_catalog")
