"""The health gate (formats/base.py ``FormatFactory.health_gate``) on real Iceberg tables written by pyiceberg
(a SQL catalog on SQLite, no JVM), through the real lifecycle and store: a run that does not pay is a
recorded, skipped process whose summary carries the figures and thresholds that decided it, and no job is
submitted; a run that pays submits its job. The job engine is the one stand-in (it records what it got)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.formats.base import HEALTH_GATE_ENV
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])


class RecordingSubmitter:
    def __init__(self) -> None:
        self.jobs: list[JobSpec] = []

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.jobs.append(job)
        if on_started is not None:
            on_started("local-1")
        return JobResult(status="SUCCESS", summary={"rewritten_data_files_count": 8})

    def kill(self) -> None:
        pass


@pytest.fixture(autouse=True)
def gate_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HEALTH_GATE_ENV, "1")  # the suite runs with it off (tests/conftest.py)


@pytest.fixture
def lake(tmp_path: Path) -> tuple[CatalogSpec, Any]:
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"file://{tmp_path / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("db")
    for name, appends in (("healthy", 1), ("small", 8)):
        table = cat.create_table(f"db.{name}", schema=SCHEMA)
        for i in range(appends):
            table.append(pa.table({"id": [i * 10 + j for j in range(10)], "v": ["x"] * 10}, schema=SCHEMA))
    return CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri}), cat


def _spec(name: str, actions: dict[str, Any]) -> TableSpec:
    return TableSpec.model_validate({"catalog": "lake", "namespace": "db", "name": name, "actions": actions})


def _trigger(catalog: CatalogSpec, spec: TableSpec, action: str) -> JobSpec | dict[str, Any] | None:
    factory = default_factories().for_action(spec.format, action)
    return factory.trigger(spec, action, TriggerContext(instant=datetime.now(UTC), catalog=catalog))


def test_a_healthy_table_is_skipped_with_the_figures_that_decided(lake: tuple[CatalogSpec, Any]) -> None:
    catalog, _ = lake
    out = _trigger(catalog, _spec("healthy", {"rewrite-files": {}}), "rewrite-files")
    assert isinstance(out, dict) and out["skipped"] and out["declined"] and out["gate"] == "health"
    assert "does not pay" in out["reason"] and "would remove no file" in out["reason"]
    health = out["health"]
    assert health["score"] == 100 and health["action"] == "rewrite-files"
    figures = health["figures"]
    assert (figures["data_files"], figures["removable_data_files"]) == (1, 0)
    assert figures["thresholds"] == {"min-small-files": 5, "small-file-fraction": 0.75}


def test_a_table_that_needs_compaction_gets_its_job(lake: tuple[CatalogSpec, Any]) -> None:
    catalog, _ = lake
    out = _trigger(catalog, _spec("small", {"rewrite-files": {}}), "rewrite-files")
    assert isinstance(out, JobSpec) and out.action == "rewrite-files"


def test_thresholds_per_table_decide(lake: tuple[CatalogSpec, Any]) -> None:
    catalog, _ = lake
    strict = _spec("small", {"rewrite-files": {"thresholds": {"min-small-files": 20}}})
    out = _trigger(catalog, strict, "rewrite-files")
    assert (
        isinstance(out, dict) and "8 small files" in out["reason"] and "min-small-files 20" in out["reason"]
    )
    assert out["health"]["figures"]["thresholds"]["min-small-files"] == 20
    # the action's own min-input-files is the default (the bound the job itself applies)
    assert isinstance(
        _trigger(catalog, _spec("small", {"rewrite-files": {"min-input-files": 8}}), "rewrite-files"), JobSpec
    )
    assert isinstance(
        _trigger(catalog, _spec("small", {"rewrite-files": {"min-input-files": 9}}), "rewrite-files"), dict
    )
    # 8 manifests: fewer than min-manifests (10) by default, enough with the table's own threshold
    assert isinstance(_trigger(catalog, _spec("small", {"rewrite-manifests": {}}), "rewrite-manifests"), dict)
    eager = _spec("small", {"rewrite-manifests": {"thresholds": {"min-manifests": 2}}})
    assert isinstance(_trigger(catalog, eager, "rewrite-manifests"), JobSpec)


def test_an_action_metadata_does_not_measure_is_not_gated(lake: tuple[CatalogSpec, Any]) -> None:
    catalog, _ = lake
    out = _trigger(catalog, _spec("healthy", {"delete-orphans": {}}), "delete-orphans")
    assert isinstance(out, JobSpec)


def test_the_gate_can_be_turned_off(lake: tuple[CatalogSpec, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    catalog, _ = lake
    monkeypatch.setenv(HEALTH_GATE_ENV, "0")
    assert isinstance(_trigger(catalog, _spec("healthy", {"rewrite-files": {}}), "rewrite-files"), JobSpec)


def test_the_skip_is_a_recorded_process_and_no_job_starts(
    lake: tuple[CatalogSpec, Any], tmp_path: Path
) -> None:
    catalog, _ = lake
    store = Store.for_url(f"sqlite:///{tmp_path / 'tms.db'}")
    store.catalogs.upsert(catalog, Owner.STORE)
    for name in ("healthy", "small"):
        store.tables.upsert(_spec(name, {"rewrite-files": {}}), Owner.STORE)
    submitter = RecordingSubmitter()
    runner = ProcessRunner(store, default_factories(), submitter)
    at = datetime(2026, 3, 1, 1, tzinfo=UTC)
    skipped = runner.run(RunRequest("lake.db.healthy", "rewrite-files", at))
    assert submitter.jobs == []
    row = store.processes.get(skipped.process.id)
    assert row.status == ProcessStatus.SUCCESS and row.summary is not None
    assert row.summary["skipped"] and row.summary["gate"] == "health"
    assert row.summary["health"]["figures"]["removable_data_files"] == 0
    ran = runner.run(RunRequest("lake.db.small", "rewrite-files", at))
    assert [j.table["name"] for j in submitter.jobs] == ["small"]
    assert store.processes.get(ran.process.id).summary.get("skipped") is None

    # REST answers "why did nothing happen?" with the same summary: the reason and the figures
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store

    app = create_api_app()
    app.dependency_overrides[get_store] = lambda: store
    from airflow.api_fastapi.core_api.security import get_user

    app.dependency_overrides[get_user] = lambda: object()
    got = TestClient(app).get(f"/processes/{skipped.process.id}")
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["status"] == "SUCCESS" and body["summary"]["reason"].startswith("does not pay now")
    assert body["summary"]["health"]["figures"]["thresholds"] == {
        "min-small-files": 5,
        "small-file-fraction": 0.75,
    }


def test_runs_the_findings_do_not_measure_are_not_gated() -> None:
    from airflow_tablemgmt.core.formats import FORMATS

    factories = default_factories()
    iceberg = factories.for_action("iceberg", "rewrite-files")
    assert iceberg.gated("rewrite-files", {}) and not iceberg.gated("rewrite-files", {"rewrite-all": True})
    delta = factories.for_action("delta", "optimize")
    assert delta.gated("optimize", {}) and not delta.gated("optimize", {"zorder-by": ["day"]})
    gated = sorted(
        (fmt, a.name)
        for fmt in ("iceberg", "delta", "hudi")
        for a in FORMATS.get(fmt).actions
        if a.thresholds
    )
    assert gated == [
        ("delta", "optimize"),
        ("hudi", "archive"),
        ("hudi", "clean"),
        ("hudi", "compaction"),
        ("iceberg", "expire-snapshots"),
        ("iceberg", "rewrite-deletes"),
        ("iceberg", "rewrite-files"),
        ("iceberg", "rewrite-manifests"),
    ]


# ---- compute-stats and expire-data: skipped when the metadata shows nothing to do --------------------


@pytest.fixture
def dated(lake: tuple[CatalogSpec, Any]) -> tuple[CatalogSpec, Any, Any]:
    from datetime import timedelta

    catalog, cat = lake
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("day", pa.date32()),
            pa.field("ts", pa.timestamp("us", tz="UTC")),
        ]
    )
    table = cat.create_table("db.dated", schema=schema)
    today = datetime.now(UTC)
    days = [today.date() - timedelta(days=d) for d in (0, 1)]
    table.append(
        pa.table({"id": [1, 2], "day": days, "ts": [today, today - timedelta(days=1)]}, schema=schema)
    )
    return catalog, table, schema


def test_expire_data_is_skipped_when_no_row_is_past_the_retention(
    dated: tuple[CatalogSpec, Any, Any],
) -> None:
    from datetime import timedelta

    catalog, table, schema = dated
    for column in ("day", "ts"):
        spec = _spec("dated", {"expire-data": {"column": column, "retention": "3d"}})
        out = _trigger(catalog, spec, "expire-data")
        assert isinstance(out, dict) and out["gate"] == "health", (column, out)
        assert (
            out["reason"].startswith("nothing to do: no row of")
            and out["health"]["figures"]["column"] == column
        )
    old = datetime.now(UTC) - timedelta(days=10)
    table.append(pa.table({"id": [3], "day": [old.date()], "ts": [old]}, schema=schema))
    for column in ("day", "ts"):
        spec = _spec("dated", {"expire-data": {"column": column, "retention": "3d"}})
        assert isinstance(_trigger(catalog, spec, "expire-data"), JobSpec), column


def test_compute_stats_is_skipped_when_the_current_snapshot_has_statistics(
    dated: tuple[CatalogSpec, Any, Any],
) -> None:
    from pyiceberg.table.statistics import StatisticsFile

    catalog, table, _ = dated
    spec = _spec("dated", {"compute-stats": {}})
    assert isinstance(_trigger(catalog, spec, "compute-stats"), JobSpec)  # none yet
    snapshot_id = table.current_snapshot().snapshot_id
    stats = StatisticsFile(
        snapshot_id=snapshot_id,
        statistics_path=f"{table.location()}/metadata/stats.puffin",
        file_size_in_bytes=100,
        file_footer_size_in_bytes=10,
        blob_metadata=[],
    )
    with table.update_statistics() as update:
        update.set_statistics(stats)
    out = _trigger(catalog, spec, "compute-stats")
    assert isinstance(out, dict) and out["health"]["figures"]["snapshot_id"] == snapshot_id
    assert "has statistics already" in out["reason"]
