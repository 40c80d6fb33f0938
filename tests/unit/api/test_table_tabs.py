"""``GET /tables/{id}/details|files|snapshots`` through the real API app: a real Iceberg table (a SQL
catalog on SQLite, written by pyiceberg, no JVM) read on the store's catalog; the figures equal
pyiceberg's own listing of the table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[TestClient, Any]]:
    from airflow.api_fastapi.core_api.security import get_user
    from pyiceberg.catalog.sql import SqlCatalog

    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"file://{tmp_path / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    table = cat.create_table("db.t", schema=schema, properties={"owner-note": "x"})
    for i in range(2):
        table.append(pa.table({"id": [i, i + 10], "v": ["a", "b"]}, schema=schema))
    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(
        CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri}), Owner.STORE
    )
    store.tables.upsert(TableSpec(catalog="lake", namespace="db", name="t", owner="team_a"), Owner.STORE)
    app = create_api_app()
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[get_user] = lambda: object()
    yield TestClient(app), cat.load_table("db.t")
    store.dispose()


def test_the_three_tabs_equal_pyicebergs_reading(client: tuple[TestClient, Any]) -> None:
    api, table = client
    d = api.get("/tables/lake.db.t/details").json()
    assert [c["name"] for c in d["columns"]] == [f.name for f in table.schema().fields]
    assert d["owner"] == "team_a" and d["catalog"]["name"] == "lake" and d["catalog"]["type"] == "jdbc"
    assert d["properties"]["owner-note"] == "x" and d["partition_spec"]["fields"] == []

    f = api.get("/tables/lake.db.t/files").json()
    listed = table.inspect.files().to_pylist()
    assert f["totals"]["data_files"] == len(listed) == 2
    assert f["partitions"][0]["partition"] == "" and f["partitions"][0]["data_bytes"] == sum(
        r["file_size_in_bytes"] for r in listed
    )
    assert f["target_file_size_bytes"] == 512 * 1024 * 1024  # Iceberg's default: no action, no property

    s = api.get("/tables/lake.db.t/snapshots").json()
    assert [x["snapshot_id"] for x in s["snapshots"]] == [str(x.snapshot_id) for x in table.snapshots()]
    assert s["current_snapshot_id"] == str(table.current_snapshot().snapshot_id)


def test_an_unknown_table_is_404_naming_it(client: tuple[TestClient, Any]) -> None:
    api, _ = client
    r = api.get("/tables/lake.db.nope/files")
    assert r.status_code == 404 and "lake.db.nope" in r.text
