"""Cost per run (issue 39): reserved for the process cost columns.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28

Reserved so the fleet work's three migrations keep one chain while they are written side by side; no change yet.
"""

from __future__ import annotations

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
