"""REST ``/policies`` and ``GET /tables/{id}/explain`` inside the real Airflow api-server app (test_api_auth's
fixture: simple auth manager, admin and viewer tokens, a real SQLite store): mutations answer 401 to nobody,
403 to a viewer and 2xx to an admin, as the catalog endpoints do; a bad body is 422 naming the field inside it;
a declarations file's policy is 409; explain shows the precedence of a table's own declaration over two
matching policies over the defaults."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.services import RegisterRequest, register_table
from airflow_tablemgmt.store.policies import PolicyRepository
from tests.e2e import test_api_auth as _auth
from tests.e2e.test_api_auth import CATALOG, Api

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

api = _auth.api  # the module-scoped api-server app with admin and viewer tokens

CATALOG_WIDE = {
    "match": {"catalog": CATALOG, "format": "iceberg"},
    "actions": {"expire-snapshots": {"retain-last": 4, "retries": 2}, "rewrite-manifests": {}},
}
RUNS = {
    "match": {"catalog": CATALOG, "namespace": "runs", "format": "iceberg"},
    "actions": {"expire-snapshots": {"retain-last": 6}},
}


@pytest.mark.parametrize("mode", ["bearer", "cookie"])
def test_policy_mutations_need_permission_on_every_dag(api: Api, mode: str) -> None:
    name = f"auth-{mode}"
    for method, body in (("PUT", {"match": {"catalog": "nowhere"}}), ("DELETE", None)):
        anon = api.call(method, f"/policies/{name}", None, mode, json=body)
        assert anon.status_code == 401 and anon.json()["field"] == "authorization", anon.text
        viewer = api.call(method, f"/policies/{name}", "viewer", mode, json=body)
        assert viewer.status_code == 403 and viewer.json()["field"] == "permission", viewer.text
        admin = api.call(method, f"/policies/{name}", "admin", mode, json=body)
        assert admin.status_code in (200, 201), admin.text


def test_put_get_list_and_the_errors(api: Api) -> None:
    created = api.call("PUT", "/policies/api-all", "admin", json=CATALOG_WIDE)
    assert created.status_code == 201, created.text
    out = created.json()
    assert (
        out["outcome"] == "created" and out["managed-by"] == "store" and out["specificity"] == [0, 0, 2, 0, 1]
    )
    assert out["actions"]["expire-snapshots"] == {"retain-last": 4, "retries": 2}
    again = api.call("PUT", "/policies/api-all", "admin", json=CATALOG_WIDE)
    assert again.status_code == 200 and again.json()["outcome"] == "unchanged", again.text
    assert "api-all" in {p["name"] for p in api.call("GET", "/policies", "viewer").json()}
    assert api.call("GET", "/policies/api-all", "viewer").json()["discovery-interval"] == "1h"

    bad = api.call("PUT", "/policies/bad", "admin", json={"match": {"format": "orc"}})
    assert bad.status_code == 422 and bad.json()["field"] == "match.format", bad.text
    assert "'orc' is not a known table format" in bad.json()["detail"]
    bad = api.call(
        "PUT", "/policies/bad", "admin", json={"actions": {"expire-snapshots": {"retain-last": 0}}}
    )
    assert bad.status_code == 422 and bad.json()["field"] == "actions.expire-snapshots.retain-last", bad.text
    other = api.call("PUT", "/policies/bad", "admin", json={"name": "other"})
    assert other.status_code == 422 and other.json()["field"] == "name", other.text
    missing = api.call("GET", "/policies/bad", "viewer")
    assert missing.status_code == 404 and missing.json()["field"] == "name", missing.text

    # a declarations file's policy: read here, changed only in its file
    PolicyRepository.of(api.store).upsert(
        parse_policy({"name": "from-yaml", "match": {"catalog": "elsewhere"}}), Owner.CODE, "dags/tables.yaml"
    )
    for method in ("PUT", "DELETE"):
        r = api.call(method, "/policies/from-yaml", "admin", json={} if method == "PUT" else None)
        assert r.status_code == 409 and r.json()["field"] == "name", r.text
        assert "declared in dags/tables.yaml" in r.json()["detail"]


def test_explain_shows_the_table_over_two_policies_over_the_defaults(api: Api) -> None:
    table = f"{CATALOG}.runs.explained"
    register_table(
        api.store,
        RegisterRequest(
            table=table,
            actions=["expire-snapshots"],
            options={"expire-snapshots": {"older-than": "7d"}},
            source="test",
        ),
    )
    assert api.call("PUT", "/policies/api-all", "admin", json=CATALOG_WIDE).status_code in (200, 201)
    assert api.call("PUT", "/policies/api-runs", "admin", json=RUNS).status_code in (200, 201)
    r = api.call("GET", f"/tables/{table}/explain?read_properties=false", "viewer")
    assert r.status_code == 200, r.text
    doc = r.json()
    es = doc["actions"]["expire-snapshots"]
    assert es["older-than"] == {"value": "7d", "source": "table"}
    assert es["enabled"] == {"value": True, "source": "table"}
    assert es["retain-last"] == {"value": 6, "source": "policy:api-runs"}
    assert es["retries"] == {"value": 2, "source": "policy:api-all"}
    assert es["lease-wait"] == {"value": "1h", "source": "default"}
    assert doc["actions"]["rewrite-manifests"]["enabled"] == {"value": True, "source": "policy:api-all"}
    assert [(p["name"], p["applies"]) for p in doc["policies"]] == [("api-runs", True), ("api-all", True)]
    assert doc["managed-by"] == "store" and doc["enabled"] == ["expire-snapshots", "rewrite-manifests"]
    assert doc["applied"] is True  # a registered table runs its declaration with the policies merged in

    # a table not registered needs its format; with it, it is explained as discovery would enrol it
    unknown = api.call("GET", f"/tables/{CATALOG}.runs.nothere/explain?read_properties=false", "viewer")
    assert unknown.status_code == 404 and "give its format" in unknown.json()["detail"], unknown.text
    r = api.call(
        "GET", f"/tables/{CATALOG}.runs.nothere/explain?format=iceberg&read_properties=false", "viewer"
    )
    assert r.status_code == 200 and r.json()["enabled"] == ["expire-snapshots", "rewrite-manifests"], r.text
    assert api.call("DELETE", "/policies/api-runs", "admin").json() == {"name": "api-runs", "deleted": True}
    doc = api.call("GET", f"/tables/{table}/explain?read_properties=false", "viewer").json()
    assert doc["actions"]["expire-snapshots"]["retain-last"] == {"value": 4, "source": "policy:api-all"}
