"""tms_table_health, tms_action_latest, tms_process_done/hour: what the page's list and overview read.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26

With 10,000 tables the list's health sort and needs-attention filter, and the overview's process figures,
must not read every row (issue 29, ≤ 300 ms p95):

* ``tms_table_health``: each table's last health measurement (score, needs attention, the findings' kinds,
  the figures the overview sums), indexed on the score, written with the health cache's entry;
* ``tms_action_latest``: the newest process of each (table, action) and its status;
* ``tms_process_done``: one narrow row per finished process with the files and bytes it removed, and
  ``tms_process_hour``: those summed per UTC hour, action and status.

The last three are filled here from the existing processes and kept from then on in the transaction that
changes a process (``store/process_rollup.py``). The health rows fill as tables are measured.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_TABLE_ID = 3 * 128 + 2


def upgrade() -> None:
    op.create_table(
        "tms_table_health",
        sa.Column("table_id", sa.String(_TABLE_ID), nullable=False),
        sa.Column("score", sa.Integer(), nullable=False),
        sa.Column("needs_attention", sa.Boolean(), nullable=False),
        sa.Column("kinds", sa.String(1024), nullable=False),
        sa.Column("data_files", sa.BigInteger(), nullable=False),
        sa.Column("data_bytes", sa.BigInteger(), nullable=False),
        sa.Column("excess_data_files", sa.BigInteger(), nullable=False),
        sa.Column(
            "figures",
            sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql"),
            nullable=False,
        ),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("table_id", name="pk_tms_table_health"),
    )
    op.create_index("ix_tms_table_health_score_table_id", "tms_table_health", ["score", "table_id"])
    op.create_index(
        "ix_tms_table_health_needs_attention_table_id", "tms_table_health", ["needs_attention", "table_id"]
    )
    op.create_index(
        "ix_tms_table_health_sums",
        "tms_table_health",
        ["needs_attention", "kinds", "score", "data_files", "data_bytes", "excess_data_files"],
    )
    op.create_table(
        "tms_action_latest",
        sa.Column("table_id", sa.String(_TABLE_ID), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("process_id", sa.BigInteger(), nullable=False),
        sa.Column("instant", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("table_id", "action", name="pk_tms_action_latest"),
    )
    op.create_index("ix_tms_action_latest_status_instant", "tms_action_latest", ["status", "instant"])
    op.create_index("ix_tms_action_latest_process_id", "tms_action_latest", ["process_id"])
    op.create_table(
        "tms_process_done",
        sa.Column("process_id", sa.BigInteger(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("hour", sa.String(13), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("files_removed", sa.BigInteger(), nullable=False),
        sa.Column("bytes_removed", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("process_id", name="pk_tms_process_done"),
    )
    op.create_index("ix_tms_process_done_finished_at", "tms_process_done", ["finished_at"])
    op.create_table(
        "tms_process_hour",
        sa.Column("hour", sa.String(13), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("files_removed", sa.BigInteger(), nullable=False),
        sa.Column("bytes_removed", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("hour", "action", "status", name="pk_tms_process_hour"),
    )
    from airflow_tablemgmt.store.process_rollup import backfill

    backfill(op.get_bind(), cost=False)  # the cost columns come with 0011


def downgrade() -> None:
    op.drop_table("tms_process_hour")
    op.drop_table("tms_process_done")
    op.drop_table("tms_action_latest")
    op.drop_table("tms_table_health")
