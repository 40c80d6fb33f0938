"""REST /tablemgmt/v1 inside the real Airflow api-server app (simple auth manager, users admin and
viewer): every mutating endpoint answers 401 to nobody, 403 to a viewer and 2xx to an admin, with a
Bearer token and with the UI's ``_token`` cookie; run-now goes through Airflow and refuses a second
run for the same instant; YAML-owned tables refuse changes; errors are JSON naming the field."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.api_app import build_app, configure_airflow, login, sync_dags

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CATALOG = "apiauth"
_seq = itertools.count(1)


@dataclass
class Api:
    client: Any
    tokens: dict[str, str]
    store: Any
    warehouse: Path

    def headers(self, user: str | None, mode: str) -> dict[str, str]:
        if user is None or mode != "bearer":
            return {}
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    def call(self, method: str, path: str, user: str | None, mode: str = "bearer", **kw: Any) -> Any:
        self.client.cookies.clear()
        if user is not None and mode == "cookie":
            self.client.cookies.set("_token", self.tokens[user])
        return self.client.request(method, "/tablemgmt/v1" + path, headers=self.headers(user, mode), **kw)


@pytest.fixture(scope="module")
def api(airflow_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
    from airflow_tablemgmt.services import RegisterRequest, build_catalog, register_table, set_catalog

    tmp = tmp_path_factory.mktemp("api")
    configure_airflow(tmp)
    before = os.environ.get("TABLEMGMT_STORE_URL")
    os.environ["TABLEMGMT_STORE_URL"] = f"sqlite:///{tmp / 'api-store.db'}"  # not the session's store
    try:
        store = TableMgmtHook().get_store()
        warehouse = tmp / "warehouse"
        set_catalog(store, build_catalog(CATALOG, warehouse=str(warehouse)))
        # Tables whose DAGs Airflow knows: run-now needs a parsed DAG.
        for i in range(1, 4):
            register_table(
                store,
                RegisterRequest(table=f"{CATALOG}.runs.t{i}", actions=["expire-snapshots"], source="test"),
            )
        sync_dags(Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]))
        with TestClient(build_app()) as client:
            tokens = {u: login(client, u) for u in ("admin", "viewer")}
            yield Api(client, tokens, store, warehouse)
    finally:
        if before is None:
            os.environ.pop("TABLEMGMT_STORE_URL", None)
        else:
            os.environ["TABLEMGMT_STORE_URL"] = before


def _table(api: Api, actions: tuple[str, ...] = ("rewrite-files",)) -> str:
    from airflow_tablemgmt.services import RegisterRequest, register_table

    table_id = f"{CATALOG}.ns.t{next(_seq)}"
    register_table(api.store, RegisterRequest(table=table_id, actions=list(actions), source="test"))
    return table_id


def _instant() -> datetime:
    """A distinct whole-minute instant per call."""
    return datetime(2024, 6, 1, tzinfo=UTC) + timedelta(minutes=next(_seq))  # after the DAGs' start


def _pending(api: Api, table_id: str = f"{CATALOG}.runs.t1") -> int:
    process, created = api.store.processes.open(table_id, "expire-snapshots", _instant())
    assert created
    return int(process.id)


# Each mutating endpoint: (name, a function building (method, path, json) afresh for every call).
Request = tuple[str, str, dict[str, Any] | None]
MUTATIONS: dict[str, Callable[[Api], Request]] = {
    "create catalog": lambda api: (
        "POST",
        "/catalogs",
        {"name": f"c{next(_seq)}", "warehouse": f"/tmp/wh{next(_seq)}"},
    ),
    "update catalog": lambda api: ("PUT", f"/catalogs/{CATALOG}", {"warehouse": str(api.warehouse)}),
    "register table": lambda api: (
        "POST",
        "/tables",
        {"catalog": CATALOG, "namespace": "ns", "name": f"r{next(_seq)}", "actions": {"rewrite-files": {}}},
    ),
    "update table": lambda api: ("PATCH", f"/tables/{_table(api)}", {"owner": "data-team"}),
    "remove table": lambda api: ("DELETE", f"/tables/{_table(api)}", None),
    "run now": lambda api: (
        "POST",
        f"/tables/{CATALOG}.runs.t2/actions/expire-snapshots/runs",
        {"instant": _instant().isoformat()},
    ),
    "cancel process": lambda api: ("POST", f"/processes/{_pending(api)}/cancel", None),
    "run discovery": lambda api: ("POST", "/discovery", {"dry_run": True}),
}


@pytest.mark.parametrize("mode", ["bearer", "cookie"])
@pytest.mark.parametrize("endpoint", list(MUTATIONS))
def test_mutation_auth_matrix(api: Api, endpoint: str, mode: str) -> None:
    method, path, body = MUTATIONS[endpoint](api)
    anon = api.call(method, path, None, mode, json=body)
    assert anon.status_code == 401, anon.text
    assert anon.json()["field"] == "authorization"
    viewer = api.call(method, path, "viewer", mode, json=body)
    assert viewer.status_code == 403, viewer.text
    assert viewer.json()["field"] == "permission"
    admin = api.call(method, path, "admin", mode, json=body)
    assert admin.status_code in (200, 201), admin.text


@pytest.mark.parametrize(
    "path",
    ["/catalogs", "/tables", "/processes", f"/tables/{CATALOG}.runs.t1/actions", "/discovery/enrolments"],
)
def test_reads_need_a_user_and_a_viewer_may_read(api: Api, path: str) -> None:
    assert api.call("GET", path, None).status_code == 401
    for mode in ("bearer", "cookie"):
        r = api.call("GET", path, "viewer", mode)
        assert r.status_code == 200, r.text


def test_openapi_is_served(api: Api) -> None:
    spec = api.client.get("/tablemgmt/v1/openapi.json").json()
    assert "/tables/{table_id}/actions/{action}/runs" in spec["paths"]
    assert "/processes/{process_id}/cancel" in spec["paths"]


def test_run_now_triggers_the_dag_and_a_second_request_for_the_instant_is_409(api: Api) -> None:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    instant = "2025-03-01T06:00:00+00:00"
    path = f"/tables/{CATALOG}.runs.t3/actions/expire-snapshots/runs"
    first = api.call("POST", path, "admin", json={"instant": instant})
    assert first.status_code == 201, first.text
    out = first.json()
    assert out["dag_id"] == f"tms__{CATALOG}.runs.t3__expire-snapshots"
    process = api.store.processes.get(out["process_id"])
    assert (process.status, process.run_id, process.instant.isoformat()) == (
        "PENDING",
        out["run_id"],
        instant,
    )
    again = api.call("POST", path, "admin", json={"instant": instant})
    assert again.status_code == 409, again.text
    assert again.json()["field"] == "instant"
    with create_session() as session:
        runs = session.query(DagRun).filter(DagRun.dag_id == out["dag_id"]).all()
    assert [r.run_id for r in runs] == [out["run_id"]]
    assert runs[0].logical_date.isoformat() == instant


def test_run_now_of_an_action_not_enabled_names_the_action(api: Api) -> None:
    r = api.call("POST", f"/tables/{CATALOG}.runs.t1/actions/rewrite-files/runs", "admin", json={})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "action"
    assert "not enabled" in r.json()["detail"] and "expire-snapshots" in r.json()["detail"]


def test_a_table_declared_in_yaml_answers_409(api: Api) -> None:
    from airflow_tablemgmt.core.tables import Owner, parse_table

    spec = parse_table(
        {"catalog": CATALOG, "namespace": "yaml", "name": "orders", "actions": {"rewrite-files": {}}}
    )
    api.store.tables.upsert(spec, Owner.CODE)
    for method, body in (("PATCH", {"owner": "x"}), ("DELETE", None)):
        r = api.call(method, f"/tables/{spec.id}", "admin", json=body)
        assert r.status_code == 409, r.text
        assert "managed by dags/tables.yaml" in r.json()["detail"]
    r = api.call("POST", "/tables", "admin", json={"catalog": CATALOG, "namespace": "yaml", "name": "orders"})
    assert r.status_code == 409 and "managed by dags/tables.yaml" in r.json()["detail"]


def test_rest_and_service_give_the_same_message(api: Api) -> None:
    """The CLI calls register_table too: REST's 422 carries the service's very message."""
    from airflow_tablemgmt.core.errors import TableMgmtError
    from airflow_tablemgmt.services import RegisterRequest, register_table

    body = {"catalog": CATALOG, "namespace": "ns", "name": "bad", "priority": 0}
    r = api.call("POST", "/tables", "admin", json=body)
    assert r.status_code == 422, r.text
    with pytest.raises(TableMgmtError) as e:
        register_table(
            api.store,
            RegisterRequest(
                spec={k: body[k] for k in ("catalog", "namespace", "name")}, priority=0, source="body"
            ),
        )
    assert r.json()["detail"] == str(e.value)
    assert "priority" in r.json()["detail"]
    unknown = api.call(
        "POST", "/tables", "admin", json={**body, "priority": 1, "actions": {"compact-it": {}}}
    )
    assert unknown.status_code == 422 and "known actions" in unknown.json()["detail"]


def test_tables_list_filters_and_pages(api: Api) -> None:
    r = api.call("GET", f"/tables?catalog={CATALOG}&namespace=runs&action=expire-snapshots&limit=2", "viewer")
    assert r.status_code == 200, r.text
    page = r.json()
    assert page["total"] == 3 and [t["table"] for t in page["items"]] == [
        f"{CATALOG}.runs.t1",
        f"{CATALOG}.runs.t2",
    ]
    rest = api.call("GET", f"/tables?catalog={CATALOG}&namespace=runs&limit=2&offset=2", "viewer").json()
    assert [t["table"] for t in rest["items"]] == [f"{CATALOG}.runs.t3"]
    bad = api.call("GET", "/tables?action=compact-it", "viewer")
    assert bad.status_code == 422 and bad.json()["field"] == "action"
    status = api.call("GET", "/tables?status=nonsense", "viewer")
    assert status.status_code == 422 and status.json()["field"] == "status"


def test_actions_show_schedule_dag_state_and_last_process(api: Api) -> None:
    r = api.call("GET", f"/tables/{CATALOG}.runs.t1/actions", "viewer")
    assert r.status_code == 200, r.text
    (action,) = r.json()
    assert action["action"] == "expire-snapshots"
    assert action["dag_id"] == f"tms__{CATALOG}.runs.t1__expire-snapshots"
    assert action["trigger"] in ("schedule", "event") and action["interval"]
    assert action["paused"] is not None  # Airflow knows the DAG


def test_process_filters_and_404(api: Api) -> None:
    pid = _pending(api)
    r = api.call("GET", f"/processes?table={CATALOG}.runs.t1&status=PENDING&limit=500", "viewer")
    assert pid in [p["id"] for p in r.json()["items"]]
    missing = api.call("GET", "/processes/999999999", "viewer")
    assert missing.status_code == 404 and missing.json()["field"] == "process_id"
    unknown = api.call("GET", f"/tables/{CATALOG}.nope.nope", "viewer")
    assert unknown.status_code == 404 and unknown.json()["field"] == "table_id"


def test_cancel_of_a_finished_process_is_409(api: Api) -> None:
    pid = _pending(api)
    assert api.call("POST", f"/processes/{pid}/cancel", "admin").json()["status"] == "CANCELED"
    again = api.call("POST", f"/processes/{pid}/cancel", "admin")
    assert again.status_code == 409 and again.json()["field"] == "status"


def test_dag_link_opens_the_table_page(api: Api) -> None:
    r = api.client.get(
        f"/tablemgmt/dag-link/tms__{CATALOG}.runs.t1__expire-snapshots", follow_redirects=False
    )
    assert r.status_code == 307
    assert (
        r.headers["location"]
        == f"/tablemgmt/ui/#/tables/{CATALOG}.runs.t1?tab=maintenance&action=expire-snapshots"
    )


def test_health_answers_for_a_table_without_iceberg_metadata(api: Api) -> None:
    r = api.call("GET", f"/tables/{CATALOG}.runs.t1/health", "viewer")
    assert r.status_code == 200, r.text
    h = r.json()
    assert h["files"] is None and f"{CATALOG}.runs.t1" in h["error"]
    assert [a["action"] for a in h["actions"]] == ["expire-snapshots"]


def test_run_now_of_a_dag_airflow_has_not_parsed_is_404_naming_the_action(api: Api) -> None:
    table_id = _table(api, ("expire-snapshots",))  # registered after the DAGs were synced
    r = api.call("POST", f"/tables/{table_id}/actions/expire-snapshots/runs", "admin", json={})
    assert r.status_code == 404, r.text
    assert r.json()["field"] == "action" and "dag processor" in r.json()["detail"]
    assert api.store.processes.list(table_id=table_id) == []


def test_a_catalog_declared_in_yaml_answers_409(api: Api) -> None:
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner

    api.store.catalogs.upsert(CatalogSpec(name="yamlcat", warehouse=str(api.warehouse) + "-yaml"), Owner.CODE)
    r = api.call("PUT", "/catalogs/yamlcat", "admin", json={"warehouse": "/elsewhere"})
    assert r.status_code == 409, r.text
    assert "managed by dags/tables.yaml" in r.json()["detail"] and r.json()["field"] == "name"
    again = api.call("POST", "/catalogs", "admin", json={"name": "yamlcat", "warehouse": "/elsewhere2"})
    assert again.status_code == 409 and again.json()["field"] == "name"
