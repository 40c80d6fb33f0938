"""Issue 22's leftovers at /dynamic-tables, over the real routes, services and a SQLite store with the
route tests' Airflow stand-in (tests/unit/api/test_dynamic_routes.py): FLIP-435's scheduleTime is
window-checked like run-now instants; a failed POST leaves no registration (so no DAG) and no run; a
creation that fails on the worker does not stay CREATING; purge is refused over REST (it runs Spark)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_tablemgmt.core.errors import JobFailed
from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.services import dynamic
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.unit.api import test_dynamic_routes as _routes
from tests.unit.api.test_dynamic_routes import DEFINITION, Airflow, T

airflow, client, store = _routes.airflow, _routes.client, _routes.store  # its fixtures

NEW = "lake.agg.created"
NEW_DAG = f"tms__{NEW}__refresh"
BODY = {**DEFINITION, "name": "created"}


def _refresh(client: TestClient, schedule_time: Any) -> Any:
    return client.post(
        f"/dynamic-tables/{T}/refresh", json={"isPeriodic": True, "scheduleTime": schedule_time}
    )


def _soon(minutes: int) -> str:
    return (datetime.now(UTC) + timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S")


SOON = "an hour from now"


# -- (b) scheduleTime: tz-aware, within [the DAG's start, now + a small skew], never a number ------------


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("9999-12-31 00:00:00", "in the future"),
        (SOON, "in the future"),
        ("1999-01-01 00:00:00", "before the refresh DAG's start"),
        ("2023-12-31T23:59:59+00:00", "before the refresh DAG's start"),
        ("2026-02-02T00:00:00", "no time zone"),
        (-1615, "scheduleTime"),
        (1767225600, "scheduleTime"),
        (True, "scheduleTime"),
    ],
)
def test_a_schedule_time_outside_the_window_is_400_naming_the_field(
    client: TestClient, store: Store, airflow: Airflow, value: Any, says: str
) -> None:
    # The hour from now is taken when the test runs: a value computed at collection would differ between
    # pytest processes, which must collect the same test ids.
    r = _refresh(client, _soon(60) if value is SOON else value)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == "scheduleTime" and says in r.json()["detail"], r.json()
    assert airflow.runs == {} and store.processes.list(table_id=T) == []


@pytest.mark.parametrize("value", ["2026-02-02 00:00:00", "2026-02-02T01:00:00+01:00", "2024-01-01 00:00:00"])
def test_a_schedule_time_inside_the_window_is_taken(client: TestClient, airflow: Airflow, value: str) -> None:
    r = _refresh(client, value)
    assert r.status_code == 200, r.text
    assert len(airflow.runs) == 1


def test_the_window_allows_a_small_skew() -> None:
    now = datetime(2026, 6, 1, 12, tzinfo=UTC)
    assert dynamic.check_schedule_time("2026-06-01 12:04:00", now=now) == datetime(
        2026, 6, 1, 12, 4, tzinfo=UTC
    )
    with pytest.raises(Exception, match="scheduleTime: '2026-06-01 12:06:00' is in the future"):
        dynamic.check_schedule_time("2026-06-01 12:06:00", now=now)
    with pytest.raises(Exception, match="naive|no time zone"):
        dynamic.check_schedule_time(datetime(2026, 6, 1, 11), now=now)


# -- (c) a failed POST /dynamic-tables leaves nothing behind; a failed creation is not left CREATING ------


def _failing(airflow: Airflow, name: str) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"Airflow refused: {name}")

    return fail


def test_a_post_whose_run_is_refused_leaves_no_registration_and_a_paused_dag(
    client: TestClient, store: Store, airflow: Airflow, monkeypatch: pytest.MonkeyPatch
) -> None:
    airflow.paused[NEW_DAG] = True  # Airflow knows the DAG: the POST unpauses it and asks for a run
    monkeypatch.setattr(airflow, "trigger", _failing(airflow, "trigger"))
    with pytest.raises(RuntimeError, match="Airflow refused"):
        client.post("/dynamic-tables", json=BODY)
    assert store.dynamic.find(NEW) is None  # no registration: the DAG file builds no DAG for it
    assert airflow.paused[NEW_DAG] is True  # and the DAG Airflow had is paused again
    assert [r for r in airflow.runs if r[0] == NEW_DAG] == []
    [failed] = store.processes.list(table_id=NEW)  # the attempt, with its reason, in the history
    assert failed.status == ProcessStatus.FAILED and "could not be created" in (failed.failure_reason or "")
    monkeypatch.undo()  # Airflow takes runs again
    again = client.post("/dynamic-tables", json=BODY)  # nothing in the way of a new try
    assert again.status_code == 202, again.text


def test_a_post_that_fails_reading_airflow_leaves_no_registration(
    client: TestClient, store: Store, airflow: Airflow, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"n": 0}
    real = airflow.side

    def side() -> Any:
        s = real()

        def state(dag_id: str) -> Any:
            calls["n"] += 1
            raise RuntimeError("Airflow's database is locked")

        return type(s)(**{**s.__dict__, "dag_state": state})

    client.app.dependency_overrides[_routes.routes.airflow_side] = side  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="locked"):
        client.post("/dynamic-tables", json=BODY)
    assert calls["n"] >= 1 and store.dynamic.find(NEW) is None and store.processes.list(table_id=NEW) == []


class FailingJob:
    """The creation's Spark job fails (as a refused query or a Spark error does)."""

    def submit(self, job: JobSpec, on_started: Any = None) -> JobResult:
        return JobResult(
            status="FAILED", error="query: refused by the plan check", error_class="QueryNotAllowed"
        )

    def kill(self) -> None:
        pass


def test_a_creation_that_fails_on_the_worker_removes_the_table_with_its_reason_in_the_history(
    client: TestClient, store: Store, airflow: Airflow, tmp_path: Any
) -> None:
    airflow.paused[NEW_DAG] = False
    r = client.post("/dynamic-tables", json=BODY)
    assert r.status_code == 202 and r.json()["creation"] == "triggered", r.text
    process = store.processes.get(r.json()["process_id"])
    # The refresh DAG's task on a worker, its last try: the lifecycle with the real dynamic-table factory.
    runner = ProcessRunner(store, default_factories(), FailingJob(), result_dir=tmp_path / "results")
    req = RunRequest(NEW, "refresh", process.instant, parameters=process.parameters, last_try=True)
    with pytest.raises(JobFailed):
        runner.run(req)
    assert runner.table_outcome is not None and runner.table_outcome.halted
    assert store.dynamic.find(NEW) is None  # not left CREATING: removed, so its DAG goes too
    assert client.get(f"/dynamic-tables/{NEW}").status_code == 404
    history = client.get(f"/dynamic-tables/{NEW}/history").json()
    assert [(h["state"], h["trigger"]) for h in history] == [("FAILED", "CREATION")]
    assert "refused by the plan check" in history[0]["reason"]


# -- (d) purge over REST is refused (it would run Spark in the api-server) ------------------------------


def test_purge_over_rest_is_422_and_changes_nothing(
    client: TestClient, store: Store, airflow: Airflow, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[Any] = []
    monkeypatch.setattr(
        "airflow_tablemgmt.hooks.spark_job.SparkJobHook.submit", lambda *a, **k: ran.append(a)
    )
    r = client.delete(f"/dynamic-tables/{T}", params={"purge": "true"})
    assert r.status_code == 422, r.text
    assert (
        r.json()["field"] == "purge"
        and "tablemgmt dt drop" in r.json()["detail"]
        and "--purge" in r.json()["detail"]
    )
    assert store.dynamic.find(T) is not None and ran == []
    assert airflow.paused.get(f"tms__{T}__refresh") is False  # the workflow was not touched either
