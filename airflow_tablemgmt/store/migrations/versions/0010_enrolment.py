"""Enrolment by policy (issue 39): reserved for the enrolment records.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28

Reserved so the fleet work's three migrations keep one chain while they are written side by side; no change yet.
"""

from __future__ import annotations

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
