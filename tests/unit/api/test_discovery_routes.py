"""``POST /discovery`` and ``GET /discovery/enrolments`` through the real API app on a real SQLite store with a
policy, over a real pyiceberg SQL catalog: the pass's answer, the records, a listed table's ``policy``, and the
errors a caller can cause (an unknown policy, an unknown kind of change, an unknown field)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.policies import PolicyRepository


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Any]]:
    from airflow.api_fastapi.core_api.security import get_user
    from pyiceberg.catalog.sql import SqlCatalog

    from airflow_tablemgmt.api import airflow_side, enrolment, tables
    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store
    from airflow_tablemgmt.services import overview

    db, warehouse = tmp_path / "catalog.db", tmp_path / "warehouse"
    warehouse.mkdir()
    client = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    client.create_namespace(("sales",))
    schema = pa.schema([("id", pa.int64())])
    client.create_table(("sales", "orders"), schema=schema).append(pa.table({"id": [1]}, schema=schema))
    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(
        CatalogSpec(
            name="lake", type="jdbc", warehouse=f"file://{warehouse}", properties={"uri": f"jdbc:sqlite:{db}"}
        ),
        Owner.STORE,
    )
    policy = {
        "name": "fleet",
        "match": {"catalog": "lake", "format": "iceberg"},
        "actions": {"expire-snapshots": {}},
    }
    PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)
    monkeypatch.setattr(enrolment, "authorize_dags", lambda *a, **k: None)
    monkeypatch.setattr(airflow_side, "dag_states", lambda ids: {})  # Airflow has parsed no DAG here
    monkeypatch.setattr(tables, "authorize_dags", lambda *a, **k: None)
    monkeypatch.setattr(overview, "warm", lambda store, ids, **kw: 0)  # no background metadata reads here
    app = create_api_app()
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[get_user] = lambda: object()
    yield TestClient(app), client
    store.dispose()
    client.engine.dispose()


def test_a_pass_through_rest(api: tuple[TestClient, Any]) -> None:
    http, _ = api
    dry = http.post("/discovery", json={"dry_run": True})
    assert dry.status_code == 200, dry.text
    assert dry.json()["counts"]["enrolled"] == 1 and http.get("/discovery/enrolments").json() == []
    done = http.post("/discovery", json={"policy": "fleet"}).json()
    assert [(c["table"], c["policy"], c["change"]) for c in done["changes"]] == [
        ("lake.sales.orders", "fleet", "enrolled")
    ]
    assert done["catalogs"] == [
        {"catalog": "lake", "tables": 1, "complete": True, "failures": [], "unreadable": []}
    ]
    (record,) = http.get("/discovery/enrolments?policy=fleet").json()
    assert record["table_id"] == "lake.sales.orders" and record["change"] == "enrolled"
    assert "matches policy fleet" in record["reason"]
    (row,) = http.get("/tables").json()["items"]
    assert row["managed_by"] == "policy" and row["policy"] == "fleet"
    assert http.get("/tables/lake.sales.orders").json()["policy"] == "fleet"
    assert http.delete("/tables/lake.sales.orders").status_code == 409


def test_what_a_caller_can_get_wrong(api: tuple[TestClient, Any]) -> None:
    http, _ = api
    unknown = http.post("/discovery", json={"policy": "nope"})
    assert (
        unknown.status_code == 404 and "'nope' is not a policy; policies: fleet" in unknown.json()["detail"]
    )
    bad = http.get("/discovery/enrolments?change=gone")
    assert (
        bad.status_code == 422 and "allowed: enrolled, re-enrolled, updated, retired" in bad.json()["detail"]
    )
    assert http.post("/discovery", json={"dryrun": True}).status_code == 422
