"""Fleet policies (issue 39): reserved for the policies' own tables.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28

Reserved so the fleet work's three migrations keep one chain while they are written side by side; no change yet.
"""

from __future__ import annotations

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
