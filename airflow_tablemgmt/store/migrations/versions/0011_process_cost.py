"""Cost per run (issue 39): each process's executor core-seconds, CPU seconds and bytes read and written,
and their sums per UTC day, table, action and status.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28

* ``tms_process``: ``core_seconds``, ``cpu_seconds``, ``bytes_read``, ``bytes_written`` (null: not
  measured; every process before this revision), written with the process's end (``core/cost.py``);
* ``tms_process_done`` gains the process's table and the same four figures;
* ``tms_process_day``: the finished processes summed per UTC day, table, action and status (their count,
  how many were measured, the four figures, files and bytes removed), kept in the transaction that
  finishes or reopens a process (``store/process_cost.py``). Both are filled here from ``tms_process``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_TABLE_ID = 3 * 128 + 2
_COST = (
    ("core_seconds", sa.Float()),
    ("cpu_seconds", sa.Float()),
    ("bytes_read", sa.BigInteger()),
    ("bytes_written", sa.BigInteger()),
)


def upgrade() -> None:
    with op.batch_alter_table("tms_process") as batch:
        for name, type_ in _COST:
            batch.add_column(sa.Column(name, type_, nullable=True))
    with op.batch_alter_table("tms_process_done") as batch:
        batch.add_column(sa.Column("table_id", sa.String(_TABLE_ID), nullable=True))
        for name, type_ in _COST:
            batch.add_column(sa.Column(name, type_, nullable=True))
    op.create_table(
        "tms_process_day",
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("table_id", sa.String(_TABLE_ID), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("measured", sa.BigInteger(), nullable=False),
        sa.Column("core_seconds", sa.Float(), nullable=False),
        sa.Column("cpu_seconds", sa.Float(), nullable=False),
        sa.Column("bytes_read", sa.BigInteger(), nullable=False),
        sa.Column("bytes_written", sa.BigInteger(), nullable=False),
        sa.Column("files_removed", sa.BigInteger(), nullable=False),
        sa.Column("bytes_removed", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("day", "table_id", "action", "status", name="pk_tms_process_day"),
    )
    op.create_index("ix_tms_process_day_table_id_day", "tms_process_day", ["table_id", "day"])
    from airflow_tablemgmt.store.process_rollup import backfill

    backfill(op.get_bind())  # the done rows again, now with their table and cost, and the day sums


def downgrade() -> None:
    op.drop_index("ix_tms_process_day_table_id_day", table_name="tms_process_day")
    op.drop_table("tms_process_day")
    with op.batch_alter_table("tms_process_done") as batch:
        for name, _ in reversed(_COST):
            batch.drop_column(name)
        batch.drop_column("table_id")
    with op.batch_alter_table("tms_process") as batch:
        for name, _ in reversed(_COST):
            batch.drop_column(name)
