"""The REST API's contract leftovers of issue 35, through the real Airflow api-server app (the fixture of
test_api_contract.py: simple auth manager, an admin token, a SQLite store): every 401 says how to
authenticate, ``OPTIONS`` and a 405 list every method of the path, the 404s of the table and dynamic-table
routes are the declared error body, re-registering a table is a declared 200, ``GET /processes/reap`` is
a 405, identifier rules are in the OpenAPI document (a request it allows is not refused for its names),
and a NUL in a name is refused naming that field. Before issue 35 each of these tests failed."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from tests.e2e import test_api_contract as _contract
from tests.e2e.test_api_contract import TABLE, Api

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

api = _contract.api  # the module-scoped app, store and admin token


def _doc(api: Api) -> dict[str, Any]:
    r = api.call("GET", "/openapi.json")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _declared(api: Api, path: str, method: str, status: int) -> dict[str, Any]:
    """The JSON schema the document declares for that answer, its $refs resolvable."""
    doc = _doc(api)
    ref = doc["paths"][path][method.lower()]["responses"][str(status)]["content"]["application/json"][
        "schema"
    ]
    return {**ref, "components": doc["components"]}


def test_every_401_says_bearer(api: Api) -> None:
    c = api.client
    for headers in ({}, {"Authorization": "Basic YWRtaW46YWRtaW4tcHc="}, {"Authorization": "Bearer nope"}):
        r = c.get("/tablemgmt/v1/tables", headers=headers)
        assert r.status_code == 401, (headers, r.text)
        assert r.headers.get("www-authenticate") == "Bearer", (headers, dict(r.headers))
        assert r.json()["field"] == "authorization"


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        ("/tables", "GET, POST, OPTIONS"),
        (f"/tables/{TABLE}", "GET, PATCH, DELETE, OPTIONS"),
        ("/catalogs/lake", "GET, PUT, DELETE, OPTIONS"),
        (f"/dynamic-tables/{TABLE}", "GET, PATCH, DELETE, OPTIONS"),
        ("/processes/reap", "POST, OPTIONS"),
    ],
)
def test_options_and_405_list_every_method_of_the_path(api: Api, path: str, methods: str) -> None:
    r = api.call("OPTIONS", path)
    assert r.status_code == 204, r.text
    assert r.headers["allow"] == methods
    wrong = api.call("PUT" if "PUT" not in methods else "POST", path, json={})
    assert wrong.status_code == 405, wrong.text
    assert wrong.headers["allow"] == methods and wrong.json()["field"] == "method"


def test_get_processes_reap_is_405_not_a_bad_process_id(api: Api) -> None:
    r = api.call("GET", "/processes/reap")
    assert r.status_code == 405, r.text
    assert r.headers["allow"] == "POST, OPTIONS"
    assert api.call("GET", "/processes/999999").status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "template"),
    [
        ("GET", "/dynamic-tables/lake.db.none", "/dynamic-tables/{table_id}"),
        ("GET", "/tables/lake.db.none/actions", "/tables/{table_id}/actions"),
        ("GET", "/tables/lake.db.none/details", "/tables/{table_id}/details"),
        ("GET", "/tables/lake.db.none/snapshots", "/tables/{table_id}/snapshots"),
        ("POST", "/dynamic-tables/lake.db.none/refresh", "/dynamic-tables/{table_id}/refresh"),
        # a newline: Airflow's mount pattern stops there, so Airflow itself answers {"detail": "Not Found"}
        ("GET", "/dynamic-tables/lake.db.a%0Ab", "/dynamic-tables/{table_id}"),
        ("GET", "/tables/lake.db.a%0Ab/actions", "/tables/{table_id}/actions"),
        ("POST", "/dynamic-tables/lake.db.a%0Ab/refresh", "/dynamic-tables/{table_id}/refresh"),
    ],
)
def test_404_bodies_match_the_declared_schema(api: Api, method: str, path: str, template: str) -> None:
    r = api.call(method, path, json={} if method == "POST" else None)
    assert r.status_code == 404, r.text
    jsonschema.validate(r.json(), _declared(api, template, method, 404))
    assert r.json().get("field") == ("table_id" if "%0A" not in path else None), r.json()


def test_registering_a_registered_table_is_a_declared_200(api: Api) -> None:
    body = {"catalog": "lake", "namespace": "db", "name": "t", "priority": 4}
    r = api.call("POST", "/tables", json=body)
    assert r.status_code == 200, r.text
    jsonschema.validate(r.json(), _declared(api, "/tables", "POST", 200))
    assert r.json()["outcome"] == "updated"


def test_identifier_rules_are_in_the_openapi_document(api: Api) -> None:
    props = _doc(api)["components"]["schemas"]["TableIn"]["properties"]
    for name in ("catalog", "name"):
        assert props[name]["pattern"] == r"^[A-Za-z_][A-Za-z0-9_]{0,127}$" and props[name]["maxLength"] == 128
    assert props["namespace"]["pattern"].startswith(r"^[A-Za-z_][A-Za-z0-9_]{0,127}(\.")
    # What the document allows is accepted; what it refuses is refused naming the field and the value.
    ok = api.call("POST", "/tables", json={"catalog": "lake", "namespace": "db.eu", "name": "_T9"})
    assert ok.status_code == 201, ok.text
    bad = api.call("POST", "/tables", json={"catalog": "lake", "namespace": "db", "name": "9t"})
    assert bad.status_code == 422 and bad.json()["field"] == "name" and "'9t'" in bad.json()["detail"], (
        bad.text
    )


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/tables", {"catalog": "lake", "namespace": "db", "name": "a\u0000b"}, "name"),
        ("/catalogs", {"name": "a\u0000b", "warehouse": "/tmp/nul"}, "name"),
        (
            "/dynamic-tables",
            {
                "name": "a\u0000b",
                "catalog": "lake",
                "namespace": "db",
                "query": "SELECT 1",
                "freshness": "1 DAY",
            },
            "name",
        ),
        (
            "/dynamic-tables",
            {"identifier": "lake.db.a\u0000b", "query": "SELECT 1", "freshness": "1 DAY"},
            "identifier",
        ),
    ],
)
def test_a_nul_in_a_name_names_that_field(api: Api, path: str, body: dict[str, Any], field: str) -> None:
    r = api.call("POST", path, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        (
            "POST",
            "/tables",
            {"catalog": "lake", "namespace": "db", "name": "s", "replace_actions": 0},
            "replace_actions",
        ),
        ("PATCH", f"/tables/{TABLE}", {"priority": "3"}, "priority"),
        ("POST", f"/dynamic-tables/{TABLE}/refresh", {"isPeriodic": 1}, "isPeriodic"),
    ],
)
def test_a_body_the_document_refuses_is_refused(
    api: Api, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    """JSON's 0 is not false and "3" not a number: found by schemathesis' negative_data_rejection (a
    table was registered from ``replace_actions: 0``)."""
    r = api.call(method, path, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()
