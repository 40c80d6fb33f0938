"""Refresh modes (issue 41) through the services, the factory, the store, the CLI and REST, on a real SQLite
store; the Spark job is the one stand-in, answering with the summary keys spark/job/refresh.py writes
(``refresh_mode``, ``refresh_mode_reason``, ``incremental``: the analysis of the query). The analysis itself:
tests/unit/core/dynamic/test_incremental.py; on real Spark: tests/integration/spark/test_refresh_modes.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_tablemgmt.core.dynamic.incremental import WHEN_APPENDS
from airflow_tablemgmt.core.dynamic.incremental_decision import NO_PREVIOUS
from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.services import dynamic
from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store

T = "lake.agg.daily"
SOURCE = "lake.sales.orders"
QUERY = f"SELECT day, count(*) AS n FROM {SOURCE} GROUP BY day"
CAN = {
    "incremental": True,
    "strategy": "MERGE_BY_KEY",
    "reason": f"GROUP BY day with count of {SOURCE}: the changed groups are merged into the table by key",
    "construct": None,
    "sources": [SOURCE],
    "notes": [],
}
CANNOT = {
    "incremental": False,
    "strategy": None,
    "reason": "it uses a window function (row_number)",
    "construct": "a window function (row_number)",
    "sources": [SOURCE],
    "notes": [],
}

# What a table whose query can be maintained incrementally is told (each refresh then says what it did).
PLANNED = f"MERGE_BY_KEY: {WHEN_APPENDS}"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    yield s
    s.dispose()


class Job:
    """The refresh job's stand-in: its summary as refresh.py writes it, for ``analysis``."""

    def __init__(self, analysis: dict[str, Any]) -> None:
        self.analysis = analysis
        self.jobs: list[JobSpec] = []

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.jobs.append(job)
        created = job.options["mode"] == "create"
        reason = (
            "no previous state: the table's first refresh computes the whole query"
            if created
            else NO_PREVIOUS
        )
        return JobResult(
            status="SUCCESS",
            summary={
                "refresh_action": "FULL",
                "refresh_mode": "FULL",
                "refresh_mode_reason": reason,
                "incremental": self.analysis,
                "created": created,
                "rows_written": 3,
                "source_tables": [SOURCE],
                "source_snapshots": {SOURCE: 1},
                "schema": [{"name": "day", "type": "date"}, {"name": "n", "type": "bigint"}],
            },
        )

    def kill(self) -> None:
        pass


def test_the_job_is_given_the_declared_mode_and_the_table_records_its_analysis(store: Store) -> None:
    job = Job(CAN)
    dt, process = dynamic.create(store, {"identifier": T, "query": QUERY, "freshness": "1 DAY"}, job)
    assert job.jobs[0].options["refresh_mode"] == "AUTO"
    row = dynamic.history_row(process)
    assert (row["trigger"], row["refresh_mode"], row["refresh_mode_reason"]) == (
        "CREATION",
        "FULL",
        "no previous state: the table's first refresh computes the whole query",
    )
    view = dynamic.get(store, T).to_dict()
    assert view["refresh_mode"] == {
        "declared": "AUTO",
        "mode": "INCREMENTAL",
        "reason": PLANNED,
        "incremental": CAN,
    }
    assert dt.incremental == CAN


def test_alter_to_incremental_is_checked_against_the_recorded_analysis(store: Store) -> None:
    dynamic.declare(store, {"identifier": T, "query": QUERY, "freshness": "1 DAY"})
    with pytest.raises(InvalidInput, match="refresh-mode: INCREMENTAL needs the analysis of the query of"):
        dynamic.alter(store, T, refresh_mode="INCREMENTAL")  # never refreshed: nothing analysed it
    store.dynamic.set_analysis(T, CANNOT)
    with pytest.raises(InvalidInput) as e:
        dynamic.alter(store, T, refresh_mode="incremental")
    assert str(e.value) == (
        f"refresh-mode: INCREMENTAL is not possible for the query of {T}: it uses a window function "
        "(row_number); allowed: AUTO (refreshes in full and records why), FULL, or a query without a window "
        "function (row_number)"
    )
    assert store.dynamic.get(T).definition.refresh_mode == "AUTO"  # nothing changed
    assert dynamic.alter(store, T, refresh_mode="FULL").changed == ["refresh-mode"]
    assert dynamic.get(store, T).refresh_mode["reason"] == "refresh-mode is FULL"
    store.dynamic.set_analysis(T, CAN)
    dynamic.alter(store, T, refresh_mode="INCREMENTAL")
    assert dynamic.get(store, T).refresh_mode == {
        "declared": "INCREMENTAL",
        "mode": "INCREMENTAL",
        "reason": PLANNED,
        "incremental": CAN,
    }
    with pytest.raises(InvalidInput, match="refresh-mode: 'sometimes' is not a refresh mode; allowed: AUTO"):
        dynamic.alter(store, T, refresh_mode="sometimes")


def test_alter_to_a_query_incremental_cannot_have_answers_with_the_jobs_refusal(store: Store) -> None:
    from airflow_tablemgmt.core.dynamic.incremental import IncrementalNotPossible

    dynamic.declare(
        store, {"identifier": T, "query": QUERY, "freshness": "1 DAY", "refresh-mode": "INCREMENTAL"}
    )
    refusal = (
        f"refresh-mode: INCREMENTAL is not possible for the query of {T}: it uses LIMIT; allowed: AUTO (refreshes "
        "in full and records why), FULL, or a query without LIMIT"
    )

    class Refusing(Job):
        def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
            self.jobs.append(job)
            return JobResult(status="FAILED", error_class=IncrementalNotPossible.__name__, error=refusal)

    job = Refusing(CANNOT)
    with pytest.raises(InvalidInput) as e:
        dynamic.alter(store, T, query=f"SELECT day FROM {SOURCE} LIMIT 3", runner=job)
    assert str(e.value) == refusal
    assert job.jobs[0].options["mode"] == "analyse" and job.jobs[0].options["refresh_mode"] == "INCREMENTAL"
    assert store.dynamic.get(T).definition.query == QUERY  # nothing changed


def test_a_new_query_forgets_the_analysis_of_the_old_one(store: Store) -> None:
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec

    dynamic.declare(store, {"identifier": T, "query": QUERY, "freshness": "1 DAY"}, Owner.CODE)
    store.dynamic.set_analysis(T, CAN)
    same = store.dynamic.get(T).definition
    store.dynamic.upsert(same.model_copy(update={"freshness": same.freshness}), Owner.CODE)
    assert store.dynamic.get(T).incremental == CAN
    changed = DynamicTableSpec.model_validate(
        {**same.model_dump(by_alias=True, mode="json"), "query": f"SELECT day FROM {SOURCE}"}
    )
    store.dynamic.upsert(changed, Owner.CODE)
    assert store.dynamic.get(T).incremental is None
    assert (
        dynamic.get(store, T).refresh_mode["reason"]
        == "the query has not been analysed yet (its first refresh does)"
    )


def test_cli_and_rest_show_the_mode_and_why(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_tablemgmt.cli import main
    from airflow_tablemgmt.hooks import spark_job

    job = Job(CAN)
    monkeypatch.setattr(spark_job, "SparkJobHook", lambda conn_id="spark_default": job)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    create = ["--store-url", url, "dt", "create", T, "--query", QUERY, "--freshness", "1 DAY"]
    assert main([*create, "--refresh-mode", "incremental"]) == 0
    out = capsys.readouterr().out
    assert f"refresh mode INCREMENTAL: {PLANNED}" in out, out
    assert main(["--store-url", url, "dt", "history", T]) == 0
    history = capsys.readouterr().out
    assert "MODE" in history.splitlines()[0] and "no previous state" in history, history
    assert main(["--store-url", url, "dt", "list", "--output", "json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["refresh_mode"]["declared"] == "INCREMENTAL"
    store.dynamic.set_analysis(T, CANNOT)
    assert main(["--store-url", url, "dt", "alter", T, "--refresh-mode", "AUTO"]) == 0
    capsys.readouterr()

    app_client = _client(store)
    got = app_client.get(f"/dynamic-tables/{T}").json()
    assert got["refresh_mode"] == {
        "declared": "AUTO",
        "mode": "FULL",
        "reason": "the query cannot be maintained incrementally: it uses a window function (row_number)",
        "incremental": CANNOT,
    }
    [last] = app_client.get(f"/dynamic-tables/{T}/history").json()
    assert (last["refresh_mode"], last["refresh_mode_reason"]) == (
        "FULL",
        "no previous state: the table's first refresh computes the whole query",
    )
    r = app_client.patch(f"/dynamic-tables/{T}", json={"refresh_mode": "INCREMENTAL"})
    assert (r.status_code, r.json()["field"]) == (422, "refresh-mode"), r.text
    assert r.json()["detail"].startswith("refresh-mode: INCREMENTAL is not possible for the query of")
    assert "a window function (row_number)" in r.json()["detail"]
    r = app_client.patch(f"/dynamic-tables/{T}", json={"refresh_mode": "FULL"})
    assert r.status_code == 200 and r.json()["refresh_mode"]["declared"] == "FULL", r.text


def _client(store: Store) -> TestClient:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import FastAPI

    from airflow_tablemgmt.api import dynamic as routes
    from airflow_tablemgmt.api.deps import get_store
    from airflow_tablemgmt.api.errors import install_error_handlers
    from tests.unit.api.test_dynamic_routes import Airflow

    app = FastAPI()
    install_error_handlers(app)
    app.include_router(routes.router)
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[routes.airflow_side] = Airflow(paused={f"tms__{T}__refresh": False}).side
    app.dependency_overrides[get_user] = lambda: None
    return TestClient(app)


class BaseJob(Job):
    """A job whose refreshes leave the whole table equal to the query at the snapshots they record."""

    def __init__(self) -> None:
        super().__init__(CAN)
        self.snapshot = 100

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        result = super().submit(job, on_started)
        self.snapshot += 1
        summary = {**(result.summary or {}), "incremental_base": True, "snapshot_id": self.snapshot}
        return JobResult(status="SUCCESS", summary={**summary, "state_snapshot_id": None})


def test_a_refresh_job_is_handed_what_the_last_successful_refresh_left(store: Store) -> None:
    job = BaseJob()
    dynamic.create(store, {"identifier": T, "query": QUERY, "freshness": "1 DAY"}, job)
    assert "previous" not in job.jobs[0].options  # a creation has no previous state
    # Periodic, at times of their own (a manual refresh in the creation's second would be the creation's
    # process); the NO_DATA check cannot read the source here, so the job runs.
    first = dynamic.refresh_now(store, T, runner=job, is_periodic=True, schedule_time="2026-01-02 00:00:00")
    assert job.jobs[1].options["previous"] == {
        "source_snapshots": {SOURCE: 1},
        "snapshot_id": 101,  # what the creation left
        "state_snapshot_id": None,
        "process_id": 1,
    }
    dynamic.refresh_now(store, T, runner=job, is_periodic=True, schedule_time="2026-01-03 00:00:00")
    assert job.jobs[2].options["previous"]["process_id"] == first.id
    assert job.jobs[2].options["previous"]["snapshot_id"] == 102
