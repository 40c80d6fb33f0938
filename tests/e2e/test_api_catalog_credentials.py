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
        {"name": "leak1", "type": "jdbc", "warehouse": "/tmp/leak1", "properties": {"uri": "jdbc:postgresql://pg/cat?user=u&password=S3CRET"}},
        {"name": "leak2", "type": "rest", "properties": {"uri": "http://u:pw@host:8181"}},
        {"name": "leak3", "type": "glue", "warehouse": "s3a://AK:SK@bucket/wh"},
    ],
)  # fmt: skip
def test_a_uri_with_a_credential_is_refused_saying_how_to_pass_it(api: Api, body: dict[str, object]) -> None:
    r = api.call("POST", "/catalogs", "admin", json=body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "credential" in detail and "conn:" in detail and "env:" in detail, detail
    for secret in SECRETS:
        assert secret not in r.text
    assert api.call("GET", f"/catalogs/{body['name']}", "viewer").status_code == 404


def _old_row(api: Api, name: str) -> None:
    now = datetime.now(UTC)
    with api.store.engine.begin() as conn:
        conn.execute(
            insert(CatalogRow.__table__).values(
                name=name, type="jdbc", warehouse=f"/tmp/{name}",
                properties={"uri": "jdbc:postgresql://pg/cat?user=u&password=S3CRET"},
                owner="store", created_at=now, updated_at=now,
            )
        )  # fmt: skip


def test_a_row_written_earlier_is_shown_redacted(api: Api) -> None:
    _old_row(api, "oldleak")
    for path in ("/catalogs", "/catalogs/oldleak"):
        r = api.call("GET", path, "viewer")
        assert r.status_code == 200, r.text
        assert "S3CRET" not in r.text and "password=***" in r.text, r.text


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
    refused = tablemgmt("catalog", "set", "clileak2", "--type", "jdbc", "--warehouse", "/tmp/c2",
                        "--property", "uri=jdbc:postgresql://pg/cat?password=S3CRET")  # fmt: skip
    assert refused.returncode != 0 and "credential" in refused.stderr + refused.stdout
    assert "S3CRET" not in refused.stderr + refused.stdout
    ok(tablemgmt("register", "clileak.db.t", "--action", "rewrite-files"))
    in_use = tablemgmt("catalog", "remove", "clileak")
    assert in_use.returncode != 0 and "clileak.db.t" in in_use.stderr + in_use.stdout
    ok(tablemgmt("remove", "clileak.db.t"))
    removed = ok(tablemgmt("catalog", "remove", "clileak"))
    assert "catalog clileak: removed" in removed.stdout
