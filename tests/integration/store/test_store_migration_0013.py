"""Migration 0013 (issue 41): stored dynamic-table definitions keep the mode they had, as ``FULL``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from alembic import command
from sqlalchemy import insert, select

from airflow_tablemgmt.store.engine import alembic_config
from airflow_tablemgmt.store.models import TableRow

pytestmark = pytest.mark.integration

_T = TableRow.__table__


def _row(table_id: str, definition: dict | None) -> dict:
    now = datetime.now(UTC)
    cat, ns, name = table_id.split(".")
    return dict(
        table_id=table_id,
        catalog=cat,
        namespace=ns,
        name=name,
        format="iceberg",
        owner_team="airflow",
        managed_by="store",
        queue="default",
        priority=1,
        actions={},
        spec={},
        dynamic=None if definition is None else {"definition": definition, "state": "ACTIVE", "version": 3},
        created_at=now,
        updated_at=now,
    )


def _migrate(store, revision: str, down: bool = False) -> None:
    config = alembic_config()
    with store.engine.connect() as conn:
        config.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(config, revision)
        conn.commit()


def test_stored_full_definitions_become_FULL_and_nothing_else_changes(backend):
    store = backend.store(auto_upgrade=False)
    _migrate(store, "0012")
    old = {"catalog": "lake", "namespace": "db", "name": "a", "query": "SELECT 1", "refresh-mode": "full"}
    with store.engine.begin() as conn:
        conn.execute(insert(_T), [_row("lake.db.a", old), _row("lake.db.plain", None)])
    _migrate(store, "0013")
    with store.engine.connect() as conn:
        docs = dict(conn.execute(select(_T.c.table_id, _T.c.dynamic)).all())
    assert docs["lake.db.plain"] is None
    assert docs["lake.db.a"] == {
        "definition": {**old, "refresh-mode": "FULL"},
        "state": "ACTIVE",
        "version": 3,
    }
    _migrate(store, "0012", down=True)
    with store.engine.connect() as conn:
        doc = conn.execute(select(_T.c.dynamic).where(_T.c.table_id == "lake.db.a")).scalar_one()
    assert doc["definition"]["refresh-mode"] == "full"
