"""tms_connect_slot: a Spark Connect server's slots; tms_process.engine wide enough to name the server.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25

Issue 26: tasks on a Spark Connect server lease one of its slots (the server's slot limit), and a slot keeps
the server-side session its last task left configured, for the next task of the same catalog settings
(``store/connect_slots.py``). A process row's ``engine`` records what ran it: ``spark-submit``, or
``spark-connect sc://host:port`` (up to 255 characters; it was 32).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tms_connect_slot",
        sa.Column("server", sa.String(255), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.String(64), nullable=True),
        sa.Column("settings_hash", sa.String(64), nullable=True),
        sa.Column("holder", sa.String(255), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("server", "slot", name="pk_tms_connect_slot"),
    )
    with op.batch_alter_table("tms_process") as batch:
        batch.alter_column(
            "engine", existing_type=sa.String(32), type_=sa.String(255), existing_nullable=False
        )


def downgrade() -> None:
    with op.batch_alter_table("tms_process") as batch:
        batch.alter_column(
            "engine", existing_type=sa.String(255), type_=sa.String(32), existing_nullable=False
        )
    op.drop_table("tms_connect_slot")
