"""``GET /tablemgmt/v1/tables`` and ``GET /overview`` through the real API app on a real SQLite store:
each row carries what the page shows (badges, cached health score), so the page makes no per-row request."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.services import health
from airflow_tablemgmt.store import Store


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Store]]:
    from airflow.api_fastapi.core_api.security import get_user

    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store

    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(
        CatalogSpec(name="lake", type="hadoop", warehouse=f"file://{tmp_path}"), Owner.STORE
    )
    for name in ("a", "b"):
        spec = TableSpec(catalog="lake", namespace="db", name=name, actions={"rewrite-files": {}})
        store.tables.upsert(spec, Owner.STORE)
    p, _ = store.processes.open("lake.db.a", "rewrite-files", datetime(2026, 11, 1, tzinfo=UTC))
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=1)
    store.processes.transition(p.id, S.FAILED, expected=S.RUNNING, attempt=1, failure_reason="boom")
    cache = health._Cache(lambda: 0.0)
    monkeypatch.setattr(health, "_CACHE", cache)
    stats = FileStats(
        1, 3, 40, 40, 100, 0, 4000, 0, 10, target_file_size_bytes=1 << 20, compacted_data_files=1
    )
    health.remember(store, "lake.db.a", stats, cache=cache)
    from airflow_tablemgmt.services import overview

    monkeypatch.setattr(overview, "warm", lambda store, ids, **kw: 0)  # no background metadata reads here
    app = create_api_app()
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[get_user] = lambda: object()
    yield TestClient(app), store
    store.dispose()


def test_rows_carry_badges_and_the_cached_health(client: tuple[TestClient, Store]) -> None:
    api, _ = client
    page = api.get("/tables?limit=25&sort=health").json()
    assert page["total"] == 2 and page["measured"] == 1
    a, b = page["items"]
    assert a["table"] == "lake.db.a" and b["table"] == "lake.db.b" and b["health"] is None
    assert a["last_status"] == {"rewrite-files": "FAILED"}
    badge = a["badges"]["rewrite-files"]
    assert (
        badge["last_status"] == "FAILED" and badge["failing_streak"] == 1 and badge["last_reason"] == "boom"
    )
    assert a["health"]["needs_attention"] and a["health"]["score"] < 100
    assert [f["action"] for f in a["health"]["findings"]] == ["rewrite-files"]
    assert a["health"]["small_data_files"] == 40 and a["health"]["data_files"] == 40
    red = api.get("/tables?needs_attention=true").json()
    assert [t["table"] for t in red["items"]] == ["lake.db.a"]
    assert api.get("/tables?q=DB.B").json()["total"] == 1
    assert api.get("/tables?status=FAILED").json()["total"] == 1


def test_bad_sort_and_action_are_refused(client: tuple[TestClient, Store]) -> None:
    api, _ = client
    assert api.get("/tables?sort=size").status_code == 422
    assert api.get("/tables?action=compact-it").status_code == 422


def test_overview_counts_what_the_store_holds(client: tuple[TestClient, Store]) -> None:
    api, _ = client
    o = api.get("/overview").json()
    assert (o["tables"], o["measured_tables"], o["needs_attention"]) == (2, 1, 1)
    assert o["attention_by_kind"]["small_files"]["examples"] == ["lake.db.a"]
    assert [f["table"] for f in o["failing"]] == ["lake.db.a"]
