"""A dynamic table in a multi-level namespace (``lake.agg.eu.daily``) declared the three ways (tables.yaml's
``dynamic-tables:``, ``tablemgmt dt create``, POST /dynamic-tables) lands in a real SQLite store as one
row with namespace ``agg.eu``, and its refresh job is given that namespace. The Spark job is the one
stand-in (the CLI creates at once). The real jobs on such a table:
tests/integration/spark/test_dynamic_lifecycle.py::test_no_data_refresh_records_a_process_and_runs_no_job."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.unit.declarations.test_sync import parse_sync

T = "lake.agg.eu.daily"
SOURCE = "lake.sales.eu.orders"
QUERY = f"SELECT day, count(*) AS n FROM {SOURCE} GROUP BY day"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    yield s
    s.dispose()


def _row(store: Store, table_id: str) -> tuple[str, str, str]:
    d = store.dynamic.get(table_id).definition
    return d.catalog, d.namespace, d.name


def test_declared_in_tables_yaml(store: Store, tmp_path: Path) -> None:
    y = tmp_path / "tables.yaml"
    y.write_text(
        "catalogs: [{name: lake, warehouse: /data/wh}]\n"
        "dynamic-tables:\n"
        f"  - {{identifier: {T}, query: '{QUERY}', freshness: 1 DAY}}\n"
        f"  - {{catalog: lake, namespace: agg.eu, name: weekly, query: 'SELECT * FROM {T}', freshness: downstream}}\n"
        "  - {identifier: lake.agg.daily, query: 'SELECT 1 AS x', freshness: 1 DAY}\n"
    )
    result = parse_sync(store, y)
    assert not result.errors, result.errors
    assert _row(store, T) == ("lake", "agg.eu", "daily")
    assert _row(store, "lake.agg.eu.weekly") == ("lake", "agg.eu", "weekly")
    assert _row(store, "lake.agg.daily") == ("lake", "agg", "daily")  # a three-part twin, unchanged
    # the downstream table is scheduled on the multi-level upstream's refresh
    view = store.dynamic.get("lake.agg.eu.weekly").definition.table_spec({T, "lake.agg.daily"})
    assert view.action_settings("refresh").upstream == [T]


def test_a_bad_level_in_tables_yaml_names_the_entry_and_the_rule() -> None:
    from airflow_tablemgmt.declarations.parse import parse_declarations_text

    loaded = parse_declarations_text(
        "catalogs: [{name: lake, warehouse: /data/wh}]\n"
        "dynamic-tables:\n  - {identifier: lake.agg..daily, query: 'SELECT 1 AS x', freshness: 1 DAY}\n",
        "t.yaml",
    )
    [error] = loaded.errors
    assert error.message.startswith("t.yaml: dynamic-tables[0].namespace (dynamic table lake.agg..daily)"), (
        error
    )
    assert "'agg.' is not a valid namespace (one or more levels separated by dots" in error.message
    assert loaded.dynamic_tables == []


class _Job:
    """The Spark job's stand-in: what a creation's refresh job answers (schema, sources, one row)."""

    def __init__(self) -> None:
        self.jobs: list[JobSpec] = []

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.jobs.append(job)
        summary: dict[str, Any] = {
            "refresh_action": "FULL",
            "created": True,
            "rows_written": 1,
            "source_tables": [SOURCE],
            "source_snapshots": {SOURCE: 1},
            "partitions_written": [],
            "schema": [
                {"name": "day", "type": "date", "nullable": True},
                {"name": "n", "type": "bigint", "nullable": False},
            ],
        }
        return JobResult(status="SUCCESS", summary=summary)

    def kill(self) -> None:
        pass


def test_created_with_the_cli(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_tablemgmt.cli import main
    from airflow_tablemgmt.hooks import spark_job

    job = _Job()
    monkeypatch.setattr(spark_job, "SparkJobHook", lambda conn_id="spark_default": job)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    code = main(["--store-url", url, "dt", "create", T, "--query", QUERY, "--freshness", "1 DAY"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.startswith(f"{T}: created (ACTIVE)"), out.out
    [submitted] = job.jobs
    assert submitted.table == {"catalog": "lake", "namespace": "agg.eu", "name": "daily"}
    assert submitted.options["mode"] == "create"
    dt = store.dynamic.get(T)
    assert (dt.state, _row(store, T)) == ("ACTIVE", ("lake", "agg.eu", "daily"))
    assert dt.definition.source_tables == [SOURCE]

    assert (
        main(
            ["--store-url", url, "dt", "create", "lake.agg..x", "--query", "SELECT 1", "--freshness", "1 DAY"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "namespace: 'agg.' is not a valid namespace" in err, err
    assert len(job.jobs) == 1  # refused before any job


def test_created_through_rest(store: Store) -> None:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.api import dynamic as routes
    from airflow_tablemgmt.api.deps import get_store
    from airflow_tablemgmt.api.errors import install_error_handlers
    from tests.unit.api.test_dynamic_routes import Airflow

    airflow = Airflow()
    dag = f"tms__{T}__refresh"
    airflow.paused[dag] = False  # Airflow has parsed the refresh DAG
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(routes.router)
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[routes.airflow_side] = airflow.side
    app.dependency_overrides[get_user] = lambda: None
    with TestClient(app) as api:
        r = api.post("/dynamic-tables", json={"identifier": T, "query": QUERY, "freshness": "1 DAY"})
        assert r.status_code == 202, r.text
        assert (r.json()["table"], r.json()["state"], r.json()["creation"]) == (T, "CREATING", "triggered")
        [(dag_id, _)] = airflow.runs
        assert dag_id == dag
        assert _row(store, T) == ("lake", "agg.eu", "daily")
        apart = {
            "catalog": "lake",
            "namespace": "agg.eu",
            "name": "weekly",
            "query": f"SELECT * FROM {T}",
            "freshness": "downstream",
        }
        assert api.post("/dynamic-tables", json=apart).status_code == 202
        got = api.get(f"/dynamic-tables/{T}")
        assert got.status_code == 200, got.text
        body = got.json()
        assert (body["table"], body["dag_id"]) == (T, f"tms__{T}__refresh")
        assert (body["definition"]["catalog"], body["definition"]["namespace"]) == ("lake", "agg.eu")
        bad = api.post(
            "/dynamic-tables", json={"identifier": "lake.agg..x", "query": "SELECT 1", "freshness": "1 DAY"}
        )
        assert bad.status_code in (400, 422) and "lake.agg..x" in bad.text, bad.text
