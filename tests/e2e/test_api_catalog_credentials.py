"""Catalog credentials and removal through the real Airflow api-server app (test_api_auth's fixture:
simple auth manager, admin and viewer tokens) and the ``tablemgmt`` command line (issue 22, item 4).

A URI with a credential is refused on write (422 saying how to pass it as a reference); a row written
before the rule is shown redacted to a viewer (GET /catalogs) and by ``tablemgmt catalogs``; DELETE
/catalogs/{name} is 403 for a viewer and 409 naming the tables while any uses it; ``tablemgmt catalog
remove`` behaves the same.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import insert

from airflow_tablemgmt.store.models import CatalogRow
from tests.e2e import test_api_auth as _auth
from tests.e2e.test_api_auth import Api
from tests.e2e.test_cli import STORE_URL, ok, tablemgmt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

api = _auth.api  # the module-scoped api-server app with admin and viewer tokens
SECRETS = ("S3CRET", "u:pw@", "AK:SK")


@pytest.mark.parametrize(
    "body",
    [
        {
            "name": "leak1",
            "type": "jdbc",
            "warehouse": "/tmp/leak1",
            "properties": {"uri": "jdbc:postgresql://pg/cat?user=u&password=S3CRET"},
        },
        {"name": "leak2", "type": "rest", "properties": {"uri": "http://u:pw@host:8181"}},
        {"name": "leak3", "type": "glue", "warehouse": "s3a://AK:SK@bucket/wh"},
    ],
)
def test_a_uri_with_a_credential_is_refused_saying_how_to_pass_it(api: Api, body: dict[str, object]) -> None:
    r = api.call("POST", "/catalogs", "admin", json=body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "credential" in detail and "conn:" in detail and "env:" in detail, detail
    for secret in SECRETS:
        assert secret not in r.text
    assert api.call("GET", f"/catalogs/{body['name']}", "viewer").status_code == 404


def _old_row(
    api: Api,
    name: str,
    uri: str = "jdbc:postgresql://pg/cat?user=u&password=S3CRET",
    more: dict[str, str] | None = None,
) -> None:
    """A row written before the rules, straight into the store (every API path refuses it now)."""
    now = datetime.now(UTC)
    with api.store.engine.begin() as conn:
        conn.execute(
            insert(CatalogRow.__table__).values(
                name=name,
                type="jdbc",
                warehouse=f"/tmp/{name}",
                properties={"uri": uri, **(more or {})},
                owner="store",
                created_at=now,
                updated_at=now,
            )
        )


def test_a_row_written_earlier_is_shown_redacted(api: Api) -> None:
    _old_row(api, "oldleak")
    for path in ("/catalogs", "/catalogs/oldleak"):
        r = api.call("GET", path, "viewer")
        assert r.status_code == 200, r.text
        assert "S3CRET" not in r.text and "password=***" in r.text, r.text


# issue 35: the URI forms the first rule missed, each with the canary S3CRET
MORE_FORMS = {
    "oracle": "jdbc:oracle:thin:u/S3CRET@host:1521/db",
    "odbc": "mssql://h/db?user=u&pwd=S3CRET",
    "sqlserver": "jdbc:sqlserver://h;user=u;Password=S3CRET",
    "azure": "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=S3CRET;EndpointSuffix=core.windows.net",
    "sas": "https://acct.blob.core.windows.net/c?sv=2022&sig=S3CRET",
    "presigned": "https://b.s3.amazonaws.com/k?X-Amz-Credential=AK&X-Amz-Signature=S3CRET",
    "token": "https://h/api?access_token=S3CRET",
}


@pytest.mark.parametrize("form", sorted(MORE_FORMS))
def test_more_uri_forms_are_refused_on_write_and_redacted_for_a_viewer(api: Api, form: str) -> None:
    uri = MORE_FORMS[form]
    body = {
        "name": f"new_{form}",
        "type": "jdbc",
        "warehouse": f"/tmp/new_{form}",
        "properties": {"uri": uri},
    }
    r = api.call("POST", "/catalogs", "admin", json=body)
    assert r.status_code == 422 and "credential" in r.json()["detail"], r.text
    assert "S3CRET" not in r.text
    _old_row(api, f"old_{form}", uri)
    for path in ("/catalogs", f"/catalogs/old_{form}"):
        shown = api.call("GET", path, "viewer")
        assert shown.status_code == 200, shown.text
        assert "S3CRET" not in shown.text and "***" in shown.text, shown.text


def test_a_legacy_row_with_a_plaintext_secret_is_listed_masked_and_flagged(api: Api) -> None:
    """Before issue 35 it disappeared from GET /catalogs (its row no longer validates): an operator
    could not see it, nor that its secret must become a reference."""
    _old_row(api, "plainsecret", "jdbc:postgresql://pg/cat", {"jdbc.password": "S3CRET"})
    listed = api.call("GET", "/catalogs", "viewer")
    assert listed.status_code == 200 and "S3CRET" not in listed.text, listed.text
    (row,) = [c for c in listed.json() if c["name"] == "plainsecret"]
    assert row["properties"]["jdbc.password"] == "***"
    assert row["problem"].startswith("needs migration:") and "jdbc.password" in row["problem"], row
    assert "reference" in row["problem"], row
    one = api.call("GET", "/catalogs/plainsecret", "viewer")
    assert one.status_code == 200 and one.json()["problem"] == row["problem"], one.text
    readable = [c for c in listed.json() if c["name"] != "plainsecret"]
    assert all(c.get("problem") is None for c in readable)


def test_delete_is_403_for_a_viewer_409_while_used_and_200_after(api: Api) -> None:
    assert (
        api.call("POST", "/catalogs", "admin", json={"name": "rmme", "warehouse": "/tmp/rmme"}).status_code
        == 201
    )
    table = {"catalog": "rmme", "namespace": "ns", "name": "t", "actions": {"rewrite-files": {}}}
    assert api.call("POST", "/tables", "admin", json=table).status_code in (200, 201)
    assert api.call("DELETE", "/catalogs/rmme", "viewer").status_code == 403
    used = api.call("DELETE", "/catalogs/rmme", "admin")
    assert used.status_code == 409, used.text
    assert used.json()["field"] == "name" and "rmme.ns.t" in used.json()["detail"]
    assert api.call("DELETE", "/tables/rmme.ns.t", "admin").status_code == 200
    gone = api.call("DELETE", "/catalogs/rmme", "admin")
    assert gone.status_code == 200 and gone.json() == {"name": "rmme", "removed": True}
    assert api.call("GET", "/catalogs/rmme", "viewer").status_code == 404
    assert api.call("DELETE", "/catalogs/rmme", "admin").status_code == 404


def test_the_cli_redacts_and_removes() -> None:
    from airflow_tablemgmt.store import Store

    store = Store.for_url(STORE_URL)
    try:
        store.catalogs.list()  # the schema exists
        _old_row(Api(None, {}, store, None), "clileak")  # type: ignore[arg-type]
    finally:
        store.dispose()
    listed = ok(tablemgmt("catalogs", "--json"))
    assert "S3CRET" not in listed.stdout
    (row,) = [c for c in json.loads(listed.stdout) if c["name"] == "clileak"]
    assert row["properties"]["uri"] == "jdbc:postgresql://pg/cat?user=u&password=***"
    refused = tablemgmt(
        "catalog",
        "set",
        "clileak2",
        "--type",
        "jdbc",
        "--warehouse",
        "/tmp/c2",
        "--property",
        "uri=jdbc:postgresql://pg/cat?password=S3CRET",
    )
    assert refused.returncode != 0 and "credential" in refused.stderr + refused.stdout
    assert "S3CRET" not in refused.stderr + refused.stdout
    ok(tablemgmt("register", "clileak.db.t", "--action", "rewrite-files"))
    in_use = tablemgmt("catalog", "remove", "clileak")
    assert in_use.returncode != 0 and "clileak.db.t" in in_use.stderr + in_use.stdout
    ok(tablemgmt("remove", "clileak.db.t"))
    removed = ok(tablemgmt("catalog", "remove", "clileak"))
    assert "catalog clileak: removed" in removed.stdout
