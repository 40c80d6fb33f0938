"""/tablemgmt/v1/dynamic-tables over the real services and a real SQLite store, with Airflow's part (DAG
runs, pause flags, DAG permissions) played by an in-memory stand-in that keeps Airflow's rules: one run
per (DAG, logical date), a run asked again at a logical date that has one is that run.

FLIP-435's refresh: 400 with Flink's message for a periodic refresh without a schedule time, the same
periodic schedule time twice is the same job with one DAG run, 403 without run permission on the
refresh DAG, 404 for an unknown table; and the lifecycle routes (get, list, history, suspend, resume,
alter, drop). The real api-server, its tokens and its permissions: tests/e2e/test_api_dynamic.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from airflow_tablemgmt.api import dynamic as routes
from airflow_tablemgmt.api.deps import get_store
from airflow_tablemgmt.api.errors import install_error_handlers
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.store import Store

T = "lake.agg.daily"
DAG = f"tms__{T}__refresh"
FLINK_PERIODIC = "Schedule time must be specified for periodic refresh."
DEFINITION: dict[str, Any] = {
    "catalog": "lake",
    "namespace": "agg",
    "name": "daily",
    "query": "SELECT day, count(*) AS events FROM lake.db.events GROUP BY day",
    "freshness": "1 DAY",
    "partitioned-by": ["day"],
    "partition.fields.day.date-formatter": "yyyy-MM-dd",
}


@dataclass
class Airflow:
    """Airflow's DAG runs (unique per DAG and logical date), pause flags and run permissions."""

    runs: dict[tuple[str, datetime], tuple[str, dict[str, Any]]] = field(default_factory=dict)
    paused: dict[str, bool] = field(default_factory=lambda: {DAG: False})
    allowed: bool = True
    checks: list[tuple[str, str | None, bool]] = field(default_factory=list)
    user_sql_allowed: bool = True  # [tablemgmt] user_sql_authors matches the caller
    user_sql_checks: list[str] = field(default_factory=list)

    def authorize_user_sql(self, what: str) -> None:
        self.user_sql_checks.append(what)
        if not self.user_sql_allowed:
            raise HTTPException(403, f"permission: {what} needs [tablemgmt] user_sql_authors")

    def authorize(self, method: str, dag_id: str | None, run: bool) -> None:
        self.checks.append((method, dag_id, run))
        if not self.allowed:
            raise HTTPException(403, "Forbidden")

    def trigger(self, dag_id: str, logical_date: datetime, conf: Mapping[str, Any]) -> str:
        assert logical_date.tzinfo is not None, "Airflow needs a tz-aware logical date"
        key = (dag_id, logical_date)
        if key not in self.runs:
            self.runs[key] = (f"tablemgmt__refresh__{logical_date.isoformat()}", dict(conf))
        return self.runs[key][0]

    def pause(self, dag_id: str, paused: bool) -> None:
        self.paused[dag_id] = paused

    def side(self) -> routes.AirflowSide:
        return routes.AirflowSide(
            authorize=self.authorize,
            authorize_user_sql=self.authorize_user_sql,
            trigger=self.trigger,
            pause=self.pause,
            dag_state=lambda d: (self.paused.get(d), None),
            spark_master=lambda: "local[*]",
            find_run=lambda d, when: self.runs[(d, when)][0] if (d, when) in self.runs else None,
        )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec

    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    s.dynamic.upsert(DynamicTableSpec.model_validate(DEFINITION), Owner.STORE, state="ACTIVE")
    yield s
    s.dispose()


@pytest.fixture
def airflow() -> Airflow:
    return Airflow()


@pytest.fixture
def client(store: Store, airflow: Airflow) -> Iterator[TestClient]:
    from airflow.api_fastapi.core_api.security import get_user

    app = FastAPI()
    install_error_handlers(app)
    app.include_router(routes.router)
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[routes.airflow_side] = airflow.side
    app.dependency_overrides[get_user] = lambda: None
    with TestClient(app) as c:
        yield c


def _refresh(client: TestClient, body: dict[str, Any], table: str = T) -> Any:
    return client.post(f"/dynamic-tables/{table}/refresh", json=body)


# -- FLIP-435 refresh ---------------------------------------------------------------------------------


def test_periodic_refresh_without_schedule_time_is_400_with_flinks_message(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    r = _refresh(client, {"isPeriodic": True})
    assert r.status_code == 400, r.text
    assert FLINK_PERIODIC in r.json()["detail"]
    assert r.json()["field"]
    assert airflow.runs == {} and store.processes.list(table_id=T) == []


def test_periodic_refresh_submits_one_run_at_the_schedule_time(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    r = _refresh(client, {"isPeriodic": True, "scheduleTime": "2026-02-02 00:00:00"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert set(out) == {"jobId", "dagRunId", "clusterInfo"}
    assert out["clusterInfo"]["master"] == "local[*]" and "applicationId" in out["clusterInfo"]
    ((dag_id, logical_date),) = airflow.runs
    assert (dag_id, logical_date) == (DAG, datetime(2026, 2, 2, tzinfo=UTC))
    run_id, conf = airflow.runs[(dag_id, logical_date)]
    assert out["dagRunId"] == run_id
    assert conf["is_periodic"] is True
    process = store.processes.get(out["jobId"])
    assert (process.table_id, process.action, process.instant) == (T, "refresh", logical_date)
    assert process.parameters["is_periodic"] is True
    assert airflow.checks == [("POST", DAG, True)]


def test_the_same_periodic_schedule_time_twice_is_the_same_job_and_one_run(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    body = {"isPeriodic": True, "scheduleTime": "2026-02-03 00:00:00"}
    first, again = _refresh(client, body), _refresh(client, body)
    assert first.status_code == again.status_code == 200, again.text
    assert again.json()["jobId"] == first.json()["jobId"]
    assert again.json()["dagRunId"] == first.json()["dagRunId"]
    assert len(airflow.runs) == 1
    assert len(store.processes.list(table_id=T, action="refresh")) == 1
    other = _refresh(client, {**body, "scheduleTime": "2026-02-04 00:00:00"})
    assert other.status_code == 200 and other.json()["jobId"] != first.json()["jobId"]
    assert len(airflow.runs) == 2


def test_manual_refresh_with_static_partitions_passes_them_to_the_run(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    r = _refresh(client, {"staticPartitions": {"day": "2026-01-31"}, "dynamicOptions": {"k": "v"}})
    assert r.status_code == 200, r.text
    ((_, conf),) = airflow.runs.values()
    assert conf["is_periodic"] is False
    assert conf["static_partitions"] == {"day": "2026-01-31"}
    assert conf["dynamic_options"] == {"k": "v"}
    process = store.processes.get(r.json()["jobId"])
    assert process.parameters["static_partitions"] == {"day": "2026-01-31"}


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"staticPartitions": {"region": "eu"}}, "region"),  # not a partition key: names it and the keys
        ({"isPeriodic": True, "scheduleTime": "2026/02/02"}, "scheduleTime"),
        ({"isPeriodic": True, "scheduleTime": "2026-02-30 00:00:00"}, "scheduleTime"),
    ],
)
def test_bad_refresh_requests_are_400_naming_the_field(
    client: TestClient, store: Store, airflow: Airflow, body: dict[str, Any], words: str
) -> None:
    r = _refresh(client, body)
    assert r.status_code == 400, r.text
    assert words in r.json()["detail"]
    assert airflow.runs == {} and store.processes.list(table_id=T) == []


def test_unknown_partition_key_names_the_partition_keys(client: TestClient) -> None:
    r = _refresh(client, {"staticPartitions": {"region": "eu"}})
    assert r.status_code == 400 and "day" in r.json()["detail"], r.text


def test_refresh_without_run_permission_is_403_and_starts_nothing(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    airflow.allowed = False
    r = _refresh(client, {"isPeriodic": True, "scheduleTime": "2026-02-02 00:00:00"})
    assert r.status_code == 403, r.text
    assert r.json()["field"] == "permission"
    assert airflow.runs == {} and store.processes.list(table_id=T) == []


def test_refresh_of_an_unknown_table_is_404(client: TestClient, airflow: Airflow) -> None:
    r = _refresh(client, {}, table="lake.agg.nope")
    assert r.status_code == 404, r.text
    assert "lake.agg.nope" in r.json()["detail"]
    assert airflow.runs == {}


def test_refresh_body_is_flinks_field_names_only(client: TestClient, airflow: Airflow) -> None:
    r = _refresh(client, {"is_periodic": True})
    assert r.status_code == 422, r.text
    assert "is_periodic" in r.json()["detail"]
    assert airflow.runs == {}


# -- reads ---------------------------------------------------------------------------------------------


def test_get_shows_definition_state_freshness_cron_and_last_refresh(client: TestClient) -> None:
    empty = client.get(f"/dynamic-tables/{T}").json()
    assert empty["last_refresh"] is None
    job = _refresh(client, {"isPeriodic": True, "scheduleTime": "2026-02-02 00:00:00"}).json()["jobId"]
    r = client.get(f"/dynamic-tables/{T}")
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["table"], out["state"], out["freshness"], out["cron"]) == (T, "ACTIVE", "1 DAY", "0 0 * * *")
    assert out["definition"]["query"] == DEFINITION["query"]
    assert out["dag_id"] == DAG and out["paused"] is False
    assert out["last_refresh"]["process_id"] == job and out["last_refresh"]["state"] == "PENDING"


def test_list_and_history(client: TestClient) -> None:
    jobs = [
        _refresh(client, {"isPeriodic": True, "scheduleTime": f"2026-02-0{d} 00:00:00"}).json()["jobId"]
        for d in (2, 3)
    ]
    page = client.get("/dynamic-tables").json()
    assert page["total"] == 1 and page["items"][0]["table"] == T
    assert client.get("/dynamic-tables?state=suspended").json()["total"] == 0
    bad = client.get("/dynamic-tables?state=sleeping")
    assert bad.status_code == 422 and "ACTIVE" in bad.json()["detail"]
    history = client.get(f"/dynamic-tables/{T}/history").json()
    assert [h["process_id"] for h in history] == list(reversed(jobs))  # newest schedule time first
    assert history[0]["schedule_time"] and history[0]["state"] == "PENDING"
    assert client.get("/dynamic-tables/lake.agg.nope/history").status_code == 404


# -- lifecycle -----------------------------------------------------------------------------------------


def test_suspend_pauses_the_dag_twice_is_409_and_resume_unpauses(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    r = client.post(f"/dynamic-tables/{T}/suspend")
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "SUSPENDED" and airflow.paused[DAG] is True
    again = client.post(f"/dynamic-tables/{T}/suspend")
    assert again.status_code == 409, again.text
    assert "already suspended" in again.json()["detail"]
    resumed = client.post(f"/dynamic-tables/{T}/resume", json={"dynamic_options": {"spark.x": "1"}})
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["state"] == "ACTIVE" and airflow.paused[DAG] is False
    assert store.dynamic.get(T).dynamic_options == {"spark.x": "1"}


def test_lifecycle_without_permission_is_403_and_changes_nothing(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    airflow.allowed = False
    assert client.post(f"/dynamic-tables/{T}/suspend").status_code == 403
    assert client.patch(f"/dynamic-tables/{T}", json={"freshness": "1 HOUR"}).status_code == 403
    assert client.delete(f"/dynamic-tables/{T}").status_code == 403
    assert str(store.dynamic.get(T).state) == "ACTIVE" and airflow.paused[DAG] is False


def test_alter_freshness_reschedules_and_a_bad_one_names_the_allowed_values(
    client: TestClient, store: Store
) -> None:
    r = client.patch(f"/dynamic-tables/{T}", json={"freshness": "1 HOUR"})
    assert r.status_code == 200, r.text
    assert (r.json()["freshness"], r.json()["cron"]) == ("1 HOUR", "0 * * * *")
    bad = client.patch(f"/dynamic-tables/{T}", json={"freshness": "7 MINUTE"})
    assert bad.status_code in (400, 422), bad.text
    assert "freshness" in bad.json()["detail"] and "allowed" in bad.json()["detail"]
    assert str(store.dynamic.get(T).definition.freshness) == "1 HOUR"
    nothing = client.patch(f"/dynamic-tables/{T}", json={})
    assert nothing.status_code == 422 and nothing.json()["field"] == "body"


def test_alter_timeout_sets_the_refresh_limit_and_a_bad_one_names_field_value_and_rule(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    """PATCH takes ``timeout`` as create does: stored, shown in the definition, the refresh task's limit;
    a bad value is refused naming the field, the value and what is allowed, and nothing changes. Like
    every alter it needs [tablemgmt] user_sql_authors."""
    from datetime import timedelta

    r = client.patch(f"/dynamic-tables/{T}", json={"timeout": "30m"})
    assert r.status_code == 200, r.text
    assert r.json()["definition"]["timeout"] == "30m" and r.json()["outcome"] == "altered"
    assert store.dynamic.get(T).definition.timeout == timedelta(minutes=30)
    assert str(store.dynamic.get(T).definition.freshness) == "1 DAY"  # the rest is kept
    for bad, rule in (("soon", "expected"), ("0s", "not positive"), ("90", "no unit")):
        r = client.patch(f"/dynamic-tables/{T}", json={"timeout": bad})
        assert r.status_code in (400, 422), r.text
        detail = r.json()["detail"]
        assert "timeout" in detail and repr(bad) in detail and rule in detail, detail
    not_text = client.patch(f"/dynamic-tables/{T}", json={"timeout": 90})
    assert not_text.status_code == 422 and not_text.json()["field"] == "timeout", not_text.text
    assert store.dynamic.get(T).definition.timeout == timedelta(minutes=30)
    airflow.user_sql_allowed = False
    denied = client.patch(f"/dynamic-tables/{T}", json={"timeout": "1h"})
    assert denied.status_code == 403 and "user_sql_authors" in denied.json()["detail"]
    assert store.dynamic.get(T).definition.timeout == timedelta(minutes=30)


def test_drop_removes_the_workflow_keeps_history_and_pauses_the_dag(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    job = _refresh(client, {"isPeriodic": True, "scheduleTime": "2026-02-02 00:00:00"}).json()["jobId"]
    r = client.delete(f"/dynamic-tables/{T}")
    assert r.status_code == 200, r.text
    assert r.json() == {"table": T, "dropped": True, "purged": False}
    assert client.get(f"/dynamic-tables/{T}").status_code == 404
    assert store.processes.get(job).table_id == T
    assert client.delete(f"/dynamic-tables/{T}").status_code == 404


def test_create_with_a_refresh_mode_spark_cannot_do_is_rejected_before_spark(
    client: TestClient, store: Store
) -> None:
    body = {**DEFINITION, "name": "cont", "refresh-mode": "continuous"}
    r = client.post("/dynamic-tables", json=body)
    assert r.status_code in (400, 422), r.text
    assert "refresh-mode" in r.json()["detail"] and "full" in r.json()["detail"]
    assert store.dynamic.find("lake.agg.cont") is None


def test_a_plain_table_is_not_a_dynamic_table(client: TestClient, store: Store) -> None:
    from airflow_tablemgmt.core.tables import TableSpec

    store.tables.upsert(
        TableSpec(catalog="lake", namespace="db", name="events", actions={"rewrite-files": {}}), Owner.STORE
    )
    r = client.get("/dynamic-tables/lake.db.events")
    assert r.status_code == 404, r.text
    assert "not a dynamic table" in r.json()["detail"]


def test_refresh_before_airflow_has_the_dag_is_404_and_leaves_no_job(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    del airflow.paused[DAG]  # not parsed yet
    body = {"isPeriodic": True, "scheduleTime": "2026-02-05 00:00:00"}
    r = _refresh(client, body)
    assert r.status_code == 404, r.text
    assert "dag processor" in r.json()["detail"]
    assert store.processes.list(table_id=T) == [] and airflow.runs == {}
    airflow.paused[DAG] = False  # parsed now: the same schedule time is a fresh, working request
    again = _refresh(client, body)
    assert again.status_code == 200, again.text
    assert store.processes.get(again.json()["jobId"]).status == "PENDING"


def test_refresh_of_a_suspended_table_is_409_until_resumed(
    client: TestClient, store: Store, airflow: Airflow
) -> None:
    assert client.post(f"/dynamic-tables/{T}/suspend").status_code == 200
    r = _refresh(client, {})
    assert r.status_code == 409, r.text
    assert "suspended" in r.json()["detail"] and "resume" in r.json()["detail"]
    assert airflow.runs == {} and store.processes.list(table_id=T) == []
    assert client.post(f"/dynamic-tables/{T}/resume").status_code == 200
    assert _refresh(client, {}).status_code == 200
