"""Bad strings at the REST API, on SQLite and on PostgreSQL (the production store), through the real
Airflow api-server app: a NUL byte, a control character or a string longer than the store's column is
a 422 naming the field, never a 500 (PostgreSQL refuses NUL and over-long VARCHARs; SQLite hides
both). The database's own refusal (``DataError``) is mapped to a 422 naming the column as well."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.api_app import build_app, configure_airflow, login
from tests.e2e.store_backends import BACKENDS, store_url

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CATALOG = "lake"


@dataclass
class Api:
    client: Any
    token: str
    backend: str

    def call(self, method: str, path: str, **kw: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.token}"}
        return self.client.request(method, "/tablemgmt/v1" + path, headers=headers, **kw)


@pytest.fixture(scope="module", params=BACKENDS)
def api(
    request: pytest.FixtureRequest, airflow_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Api]:
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
    from airflow_tablemgmt.services import RegisterRequest, build_catalog, register_table, set_catalog

    tmp = tmp_path_factory.mktemp(f"badstr-{request.param}")
    configure_airflow(tmp)
    with store_url(request.param, tmp):
        store = TableMgmtHook().get_store()
        set_catalog(store, build_catalog(CATALOG, warehouse=str(tmp / "wh")))
        register_table(
            store, RegisterRequest(table=f"{CATALOG}.db.t", actions=["rewrite-files"], source="test")
        )
        with TestClient(build_app(), raise_server_exceptions=False) as client:
            yield Api(client, login(client, "admin"), request.param)


def _assert_422(r: Any, field: str) -> dict[str, Any]:
    assert r.status_code == 422, (r.status_code, r.text)
    body = r.json()
    assert field in body["field"], body
    return body


def test_nul_in_a_table_id_path_is_422_naming_it(api: Api) -> None:
    for path in ("/tables/lake.db.t%00x", "/tables/lake.db.t%00x/actions", "/dynamic-tables/lake.db.t%00x"):
        _assert_422(api.call("GET", path), "table_id")
    _assert_422(api.call("GET", "/processes", params={"table": "lake.db.t\x00x"}), "table")
    _assert_422(api.call("GET", "/catalogs/la%00ke"), "name")


def test_an_owner_of_300_characters_is_422_naming_owner(api: Api) -> None:
    r = api.call("PATCH", "/tables/lake.db.t", json={"owner": "o" * 300})
    body = _assert_422(r, "owner")
    assert "255" in body["detail"]
    r = api.call(
        "POST", "/tables", json={"catalog": CATALOG, "namespace": "db", "name": "u", "owner": "o" * 300}
    )
    _assert_422(r, "owner")
    assert api.call("GET", "/tables/lake.db.u").status_code == 404  # nothing was written


def test_control_characters_in_an_owner_or_a_warehouse_are_422(api: Api) -> None:
    _assert_422(api.call("PATCH", "/tables/lake.db.t", json={"owner": "te\x00am"}), "owner")
    _assert_422(api.call("PATCH", "/tables/lake.db.t", json={"owner": "te\nam"}), "owner")
    r = api.call("POST", "/catalogs", json={"name": "c2", "warehouse": "/tmp/w\x00h"})
    _assert_422(r, "warehouse")
    r = api.call("POST", "/catalogs", json={"name": "c3", "warehouse": "/tmp/" + "w" * 2100})
    _assert_422(r, "warehouse")
    # The table is unchanged and a fine owner still works.
    assert api.call("GET", "/tables/lake.db.t").json()["spec"]["owner"] != "te\nam"
    assert api.call("PATCH", "/tables/lake.db.t", json={"owner": "data-team"}).status_code == 200


def test_the_databases_own_refusal_is_422_naming_the_column(api: Api) -> None:
    """Bypassing the services' validation: PostgreSQL's DataError for a too-long value becomes a 422."""
    if api.backend != "postgresql":
        pytest.skip("SQLite stores any length")
    import asyncio

    from sqlalchemy import insert
    from sqlalchemy.exc import DataError
    from starlette.requests import Request

    from airflow_tablemgmt.api.db_errors import _data_error
    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
    from airflow_tablemgmt.store.models import LeaseRow

    store = TableMgmtHook().get_store()
    stmt = insert(LeaseRow.__table__).values(
        table_id="x" * 500, holder="h", acquired_at=None, expires_at=None
    )
    with pytest.raises(DataError) as caught, store._engine.begin() as conn:
        conn.execute(stmt)
    request = Request({"type": "http", "method": "GET", "path": "/", "path_params": {}, "query_string": b""})
    response = asyncio.run(_data_error(request, caught.value))
    assert response.status_code == 422
    assert b'"field":"table_id"' in response.body and b"386" in response.body


def test_bad_strings_in_a_dynamic_table_are_422_naming_the_field(api: Api) -> None:
    base = {"identifier": f"{CATALOG}.db.dt", "query": "SELECT 1 AS x", "freshness": "1 HOUR"}
    r = api.call("POST", "/dynamic-tables", json={**base, "query": "SELECT 1\x00 AS x"})
    _assert_422(r, "query")
    r = api.call("POST", "/dynamic-tables", json={**base, "owner": "o" * 300})
    _assert_422(r, "owner")
    assert api.call("GET", f"/dynamic-tables/{CATALOG}.db.dt").status_code == 404
