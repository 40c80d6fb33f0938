"""``GET /tablemgmt/v1/cost`` and the cost fields of ``GET /processes/{id}``, through the real API app on
a real SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store

COST = {"core_seconds": 7.5, "cpu_seconds": 5.0, "bytes_read": 1000, "bytes_written": 250}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[TestClient, int]]:
    from airflow.api_fastapi.core_api.security import get_user

    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store

    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(
        CatalogSpec(name="lake", type="hadoop", warehouse=f"file://{tmp_path}"), Owner.STORE
    )
    store.tables.upsert(
        TableSpec(catalog="lake", namespace="db", name="a", actions={"rewrite-files": {}}), Owner.STORE
    )
    p, _ = store.processes.open("lake.db.a", "rewrite-files", datetime(2026, 11, 1, tzinfo=UTC))
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=1)
    store.processes.transition(p.id, S.SUCCESS, expected=S.RUNNING, attempt=1, summary={"cost": COST})
    app = create_api_app()
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[get_user] = lambda: object()
    yield TestClient(app), p.id
    store.dispose()


def test_cost_rollup_and_a_process_cost(client: tuple[TestClient, int]) -> None:
    http, pid = client
    got = http.get("/cost", params={"by": "table,day", "days": 7})
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["by"] == ["day", "table"] and body["days"] == 7
    (item,) = body["items"]
    assert item["table"] == "lake.db.a" and item["day"] == datetime.now(UTC).strftime("%Y-%m-%d")
    assert (item["n"], item["measured"], item["core_seconds"], item["bytes_written"]) == (1, 1, 7.5, 250)
    assert item["policy"] is None  # not asked for

    one = http.get(f"/processes/{pid}").json()
    assert {k: one[k] for k in COST} == COST


def test_a_bad_grouping_names_the_field_and_the_allowed_values(client: tuple[TestClient, int]) -> None:
    http, _ = client
    got = http.get("/cost", params={"by": "week"})
    assert got.status_code == 422
    assert got.json()["field"] == "by" and "day, policy, table, action, status" in got.json()["detail"]
    assert http.get("/cost", params={"days": 0}).status_code == 422
