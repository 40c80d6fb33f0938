"""A table in a multi-level namespace (``lake.sales.eu.orders``) declared the three ways (tables.yaml, the
CLI, the REST API) lands in a real SQLite store as one row with namespace ``sales.eu``; the DAG ids of its
actions read back to it. Two-level tables beside it are unchanged."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from airflow_tablemgmt.core.naming import dag_id_for, parse_dag_id
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.store import Store
from tests.unit.declarations.test_sync import parse_sync


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


def _row(store: Store, table_id: str) -> tuple[str, str, str]:
    spec = store.tables.get(table_id)
    return spec.catalog, spec.namespace, spec.name


def test_declared_in_tables_yaml(store: Store, tmp_path: Path) -> None:
    y = tmp_path / "tables.yaml"
    y.write_text(
        "catalogs: [{name: lake, warehouse: /data/wh}]\n"
        "tables:\n"
        "  - {catalog: lake, namespace: sales.eu, name: orders, actions: {expire-snapshots: {}}}\n"
        "  - {catalog: lake, namespace: sales, name: orders, actions: {expire-snapshots: {}}}\n"
    )
    result = parse_sync(store, y)
    assert not getattr(result, "errors", None), result
    assert _row(store, "lake.sales.eu.orders") == ("lake", "sales.eu", "orders")
    assert _row(store, "lake.sales.orders") == ("lake", "sales", "orders")  # the two-level twin, unchanged
    dag_id = dag_id_for("lake.sales.eu.orders", "expire-snapshots")
    assert parse_dag_id(dag_id) == ("lake.sales.eu.orders", "expire-snapshots")


def test_registered_with_the_cli(tmp_path: Path) -> None:
    from airflow_tablemgmt.cli import main

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "--store-url",
                url,
                "register",
                "lake.sales.eu.orders",
                "--catalog-type",
                "hadoop",
                "--warehouse",
                str(tmp_path / "wh"),
                "--action",
                "expire-snapshots",
            ]
        )
    assert code == 0, out.getvalue()
    store = Store(url)
    try:
        assert _row(store, "lake.sales.eu.orders") == ("lake", "sales.eu", "orders")
    finally:
        store.dispose()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--store-url", url, "show", "lake.sales.eu.orders", "--json"]) == 0


def test_registered_read_and_changed_through_the_rest_api(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.api import tables as routes
    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store

    checked: list[
        str | None
    ] = []  # Airflow's auth manager needs its own DB; record the DAGs it is asked about
    monkeypatch.setattr(routes, "authorize_dags", lambda _r, _u, _m, dags, run=False: checked.extend(dags))
    from airflow_tablemgmt.api import airflow_side

    monkeypatch.setattr(airflow_side, "dag_states", lambda ids: {i: (False, None) for i in ids})

    store.catalogs.upsert(
        CatalogSpec(name="lake", type="hadoop", warehouse=f"file://{tmp_path}"), Owner.STORE
    )
    app = create_api_app()
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[get_user] = lambda: object()
    api = TestClient(app)
    created = api.post(
        "/tables",
        json={
            "catalog": "lake",
            "namespace": "sales.eu",
            "name": "orders",
            "actions": {"expire-snapshots": {}},
        },
    )
    assert created.status_code == 201, created.text
    assert created.json()["table"] == "lake.sales.eu.orders"
    assert [a["dag_id"] for a in created.json()["actions"]] == ["tms__lake.sales.eu.orders__expire-snapshots"]
    assert _row(store, "lake.sales.eu.orders") == ("lake", "sales.eu", "orders")
    got = api.get("/tables/lake.sales.eu.orders")
    assert got.status_code == 200, got.text
    changed = api.patch("/tables/lake.sales.eu.orders", json={"actions": {"delete-orphans": {}}})
    assert changed.status_code == 200, changed.text
    assert set(store.tables.get("lake.sales.eu.orders").actions) == {"expire-snapshots", "delete-orphans"}
    assert "tms__lake.sales.eu.orders__expire-snapshots" in checked, checked
    bad = api.post("/tables", json={"catalog": "lake", "namespace": "sales..eu", "name": "orders"})
    assert bad.status_code in (400, 422) and "sales..eu" in bad.text
