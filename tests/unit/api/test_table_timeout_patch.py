"""A plain table's time limit is its action's ``timeout`` option, and REST ``PATCH /tables/{id}``
changes it as any option: merged into the action's options (the others kept), kept by a later PATCH of
another option, and a bad value is a 422 naming the field, the value and what is allowed, with nothing
changed. (A dynamic table's ``timeout``: tests/unit/api/test_dynamic_routes.py.) Through the real API
app on a real SQLite store; Airflow's DAG permissions and DAG states are stood in for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store

T = "lake.db.a"


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Store]]:
    from airflow.api_fastapi.core_api.security import get_user

    from airflow_tablemgmt.api import airflow_side, tables
    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store

    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse=f"file://{tmp_path}"), Owner.STORE)
    spec = TableSpec(catalog="lake", namespace="db", name="a", actions={"rewrite-files": {}})
    store.tables.upsert(spec, Owner.STORE)
    monkeypatch.setattr(tables, "authorize_dags", lambda *a, **k: None)
    monkeypatch.setattr(airflow_side, "dag_states", lambda ids: {})  # Airflow has parsed no DAG yet
    app = create_api_app()
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[get_user] = lambda: object()
    yield TestClient(app), store
    store.dispose()


def _timeout(store: Store) -> object:
    return store.tables.get(T).actions["rewrite-files"].get("timeout")


def test_patch_changes_an_actions_timeout_and_a_bad_one_names_field_value_and_rule(
    api: tuple[TestClient, Store],
) -> None:
    client, store = api
    r = client.patch(f"/tables/{T}", json={"actions": {"rewrite-files": {"timeout": "30m"}}})
    assert r.status_code == 200, r.text
    assert _timeout(store) == "30m"
    r = client.patch(f"/tables/{T}", json={"actions": {"rewrite-files": {"min-input-files": 3}}})
    assert r.status_code == 200, r.text
    assert _timeout(store) == "30m"  # another option's change keeps it
    bad = client.patch(f"/tables/{T}", json={"actions": {"rewrite-files": {"timeout": "soon"}}})
    assert bad.status_code == 422, bad.text
    assert bad.json()["field"] == "actions.rewrite-files.timeout"
    assert "'soon'" in bad.json()["detail"] and "expected a positive duration" in bad.json()["detail"]
    assert _timeout(store) == "30m"
