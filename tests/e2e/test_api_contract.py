"""The REST API's contract (issue 22 item 5), through the real Airflow api-server app: ``field`` names
the failing path inside the body, an invalid token is 401, a body that is not JSON is 415, a huge
body is refused with an answer smaller than it, ``action`` is an enum in the OpenAPI document, and
``PUT /catalogs/{name}`` keeps the properties it leaves out."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.api_app import build_app, configure_airflow, login
from tests.e2e.store_backends import store_url

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TABLE = "lake.db.t"


@dataclass
class Api:
    client: Any
    token: str

    def call(self, method: str, path: str, token: str | None = None, **kw: Any) -> Any:
        headers = {"Authorization": f"Bearer {token or self.token}", **kw.pop("headers", {})}
        return self.client.request(method, "/tablemgmt/v1" + path, headers=headers, **kw)


@pytest.fixture(scope="module")
def api(airflow_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
    from airflow_tablemgmt.services import RegisterRequest, build_catalog, register_table, set_catalog

    tmp = tmp_path_factory.mktemp("contract")
    configure_airflow(tmp)
    with store_url("sqlite", tmp):
        store = TableMgmtHook().get_store()
        set_catalog(store, build_catalog("lake", warehouse=str(tmp / "wh")))
        register_table(store, RegisterRequest(table=TABLE, actions=["expire-snapshots"], source="test"))
        with TestClient(build_app(), raise_server_exceptions=False) as client:
            yield Api(client, login(client, "admin"))


def test_field_names_the_path_inside_the_body(api: Api) -> None:
    r = api.call("PATCH", f"/tables/{TABLE}", json={"actions": {"expire-snapshots": {"interval": "soonish"}}})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "actions.expire-snapshots.interval", r.json()
    r = api.call("PATCH", f"/tables/{TABLE}", json={"priority": 0})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "priority", r.json()


def test_an_invalid_token_is_401_not_403(api: Api) -> None:
    r = api.call("GET", "/tables", token="not-a-jwt")
    assert r.status_code == 401, r.text
    assert r.json()["field"] == "authorization"
    assert r.headers["www-authenticate"] == "Bearer"
    forged = api.token[:-4] + ("AAAA" if not api.token.endswith("AAAA") else "BBBB")
    assert api.call("PATCH", f"/tables/{TABLE}", token=forged, json={"priority": 3}).status_code == 401


def test_a_body_that_is_not_json_is_415(api: Api) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/xml"):
        r = api.call(
            "PATCH", f"/tables/{TABLE}", content=b"priority=3", headers={"Content-Type": content_type}
        )
        assert r.status_code == 415, (content_type, r.text)
        assert r.json()["field"] == "content-type"
    ok = api.call(
        "PATCH", f"/tables/{TABLE}", content=b'{"priority": 3}', headers={"Content-Type": "application/json"}
    )
    assert ok.status_code == 200, ok.text


def test_a_huge_body_is_413_with_a_short_answer(api: Api) -> None:
    from airflow_tablemgmt.api.limits import MAX_BODY_BYTES

    huge = b'{"owner": "' + b"x" * (MAX_BODY_BYTES + 10) + b'"}'
    r = api.call("PATCH", f"/tables/{TABLE}", content=huge, headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text[:300]
    assert len(r.content) < 300 and r.json()["field"] == "body"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while the body arrives
        yield b'{"owner": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b"x" * 65536
        yield b'"}'

    r = api.call("PATCH", f"/tables/{TABLE}", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text[:300]
    # A large-but-allowed invalid body: the 422 does not echo it back.
    big = b'{"owner": "' + b"x" * 200_000 + b'"}'
    r = api.call("PATCH", f"/tables/{TABLE}", content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and len(r.content) < 2000, (r.status_code, len(r.content))


def test_action_is_an_enum_in_the_openapi_document(api: Api) -> None:
    from airflow_tablemgmt.core.actions import ACTIONS

    doc = api.call("GET", "/openapi.json").json()
    op = doc["paths"]["/tables/{table_id}/actions/{action}/runs"]["post"]
    (param,) = [p for p in op["parameters"] if p["name"] == "action"]
    assert sorted(param["schema"]["enum"]) == ACTIONS.names()
    r = api.call("POST", f"/tables/{TABLE}/actions/no-such-action/runs", json={})
    assert r.status_code == 422 and r.json()["field"] == "action", r.text


def test_put_catalog_without_properties_keeps_them(api: Api, tmp_path: Any) -> None:
    props = {"cache-enabled": "false"}
    r = api.call(
        "POST", "/catalogs", json={"name": "keep", "warehouse": str(tmp_path / "w"), "properties": props}
    )
    assert r.status_code == 201, r.text
    r = api.call("PUT", "/catalogs/keep", json={"warehouse": str(tmp_path / "w2")})
    assert r.status_code == 200, r.text
    got = api.call("GET", "/catalogs/keep").json()
    assert got["properties"] == props and got["warehouse"] == str(tmp_path / "w2")
    r = api.call("PUT", "/catalogs/keep", json={"properties": {}})  # an explicit {} clears them
    assert r.status_code == 200, r.text
    got = api.call("GET", "/catalogs/keep").json()
    assert got["properties"] == {} and got["warehouse"] == str(tmp_path / "w2")


def test_the_openapi_document_declares_the_error_answers(api: Api) -> None:
    doc = api.call("GET", "/openapi.json").json()
    assert set(doc["components"]["schemas"]["ErrorOut"]["required"]) == {"detail", "field"}
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for status in ("401", "403", "415", "422"):
                ref = op["responses"][status]["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorOut"), (method, path, status)
