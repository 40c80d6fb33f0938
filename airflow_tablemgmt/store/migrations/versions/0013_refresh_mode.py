"""Refresh modes (issue 41): a dynamic table's ``refresh-mode`` is ``AUTO``, ``FULL`` or ``INCREMENTAL``.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28

Before this revision the only mode was ``full`` (Spark batch refreshes were full), stored lower-case in each
dynamic table's definition (``tms_table.dynamic -> definition -> refresh-mode``). The stored definitions are
rewritten to ``FULL``: a table defined before keeps refreshing as it was defined, whether its definition said
``full`` or took the default, which the document cannot tell apart. ``AUTO``, the default from now on, applies
to definitions written after it: a table declared in a file follows its file at the next sync (a file without
``refresh-mode`` gives ``AUTO``), a table registered through REST or the CLI moves with ``tablemgmt dt alter
--refresh-mode AUTO``. No column changes: the mode is part of the definition document, and a refresh's mode
and reason are part of its process summary.

Downgrade writes ``full`` back for every mode (the only value the earlier code reads).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from airflow_tablemgmt.store.sqltypes import json_document

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_KEY = "refresh-mode"
_TABLE = sa.table("tms_table", sa.column("id", sa.BigInteger()), sa.column("dynamic", json_document()))


def _rewrite(mode_of: Any) -> None:
    """Set each stored definition's refresh mode to ``mode_of(current value)``; other fields untouched."""
    conn = op.get_bind()
    rows = conn.execute(sa.select(_TABLE.c.id, _TABLE.c.dynamic).where(_TABLE.c.dynamic.is_not(None))).all()
    for row_id, doc in rows:
        if not isinstance(doc, dict) or not isinstance(doc.get("definition"), dict):
            continue  # unreadable documents are reported by the repository, not repaired here
        definition = doc["definition"]
        new_mode = mode_of(definition.get(_KEY))
        if definition.get(_KEY) == new_mode:
            continue
        new_doc = {**doc, "definition": {**definition, _KEY: new_mode}}
        conn.execute(sa.update(_TABLE).where(_TABLE.c.id == row_id).values(dynamic=new_doc))


def upgrade() -> None:
    _rewrite(lambda old: "FULL" if old is None or str(old).strip().lower() == "full" else old)


def downgrade() -> None:
    _rewrite(lambda old: "full")
