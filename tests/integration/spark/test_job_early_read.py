"""The job measures a hadoop table before its SparkSession exists, and asks Spark whenever in doubt.

In process (``job_main.run`` on the shared session) the early read runs before the table load it
replaces; through ``spark-submit`` it runs while the session starts in the background. Whether the
job loaded its table through Spark shows in its timings: a ``table_load`` phase only then.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.job import early_read
from airflow_tablemgmt.spark.job import main as job_main
from airflow_tablemgmt.spark.job.metrics import _metrics_from_metadata_tables
from airflow_tablemgmt.spark.launch.submit import run_local
from airflow_tablemgmt.spark.protocol import NO_RESULT, parse_result
from tests.integration.spark.spark_tables import TableFactory, Tables, job_spec

pytestmark = pytest.mark.integration


def _job(table: TableIdentifier, catalog: CatalogSpec, action: str, options: dict[str, Any]) -> JobSpec:
    return job_spec(table, catalog, action, options)


def _run(job: JobSpec, tables: Tables) -> tuple[int, dict[str, Any]]:
    code, line = job_main.run(job, tables.spark)
    return code, json.loads(line)


def _versions(tables: Tables, table: TableIdentifier) -> list[int]:
    names = (p.name for p in (tables.dir(table) / "metadata").glob("v*.metadata.json"))
    return sorted(int(n[1:].split(".")[0]) for n in names)


def test_a_stale_version_hint_is_read_past_to_the_newest_metadata(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec
) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=3, commits=3)
    newest = _versions(tables, table)[-1]
    # A writer creates v<N+1> before it rewrites the hint: a reader may find the hint behind.
    (tables.dir(table) / "metadata" / "version-hint.text").write_text(str(newest - 2))
    expected = _metrics_from_metadata_tables(tables.spark, table)

    early = early_read.read_early(catalog, table)
    assert early is not None and early.location.endswith(f"/v{newest}.metadata.json")

    code, payload = _run(_job(table, catalog, "rewrite-files", {"min-input-files": 2}), tables)

    assert code == 0, payload
    summary = payload["summary"]
    assert "table_load" not in summary["timings"]  # no Spark-side load: the early read served
    assert summary["before"] == expected
    assert summary["after"] == _metrics_from_metadata_tables(tables.spark, table)
    assert summary["before"]["live_records"] == summary["after"]["live_records"] == 3 * 3 * 20


@pytest.mark.parametrize("layout", ["no directory", "namespace directory without metadata", "empty metadata"])
def test_a_missing_table_is_table_not_found_as_before(
    tables: Tables, catalog: CatalogSpec, warehouse: Path, layout: str
) -> None:
    name = f"missing_{layout.replace(' ', '_')}"
    table = TableIdentifier("lake", "db", name)
    if layout != "no directory":
        (warehouse / "db" / name / "data").mkdir(parents=True)
    if layout == "empty metadata":
        (warehouse / "db" / name / "metadata").mkdir()

    code, payload = _run(_job(table, catalog, "expire-snapshots", {}), tables)

    assert code == 1
    assert payload["error_class"] == "TableNotFound"
    assert payload["error"] == f"table {table} does not exist in catalog 'lake' (warehouse {warehouse})"
    assert "table_load" in payload["timings"]  # Spark said so, not the early read


def test_a_table_without_its_hint_is_found_by_spark(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec
) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=2, commits=2)
    (tables.dir(table) / "metadata" / "version-hint.text").unlink()  # Iceberg lists the directory
    expected = _metrics_from_metadata_tables(tables.spark, table)

    code, payload = _run(_job(table, catalog, "rewrite-manifests", {}), tables)

    assert code == 0, payload
    assert "table_load" in payload["summary"]["timings"]
    assert payload["summary"]["before"] == expected


def test_metadata_pyiceberg_cannot_read_falls_back_to_spark_with_the_same_figures(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec
) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=3)
    # A table UUID in a form Java accepts and pyiceberg rejects: the metadata is Iceberg's, not pyiceberg's.
    meta = tables.dir(table) / "metadata"
    current = meta / f"v{_versions(tables, table)[-1]}.metadata.json"
    document = json.loads(current.read_text())
    document["table-uuid"] = "1-2-3-4-5"  # java.util.UUID reads it; Python's uuid does not
    current.write_text(json.dumps(document))
    (meta / f".{current.name}.crc").unlink(missing_ok=True)  # Hadoop's local checksum of the old text
    expected = _metrics_from_metadata_tables(tables.spark, table)
    assert early_read.read_early(catalog, table) is None

    code, payload = _run(_job(table, catalog, "rewrite-files", {"min-input-files": 2}), tables)

    assert code == 0, payload
    summary = payload["summary"]
    assert "table_load" in summary["timings"]
    assert summary["before"] == expected
    assert summary["after"] == _metrics_from_metadata_tables(tables.spark, table)
    assert summary["after"]["data_files"] == 2


def test_a_catalog_the_session_has_otherwise_is_loaded_through_spark(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec
) -> None:
    # The session's catalog settings differ from the spec's (spark-defaults, an older session):
    # the early read assumed the spec's, so Spark's own load is what counts.
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=2)
    other = catalog.model_copy(update={"properties": {"client.region": "nowhere-1"}})

    code, payload = _run(_job(table, other, "rewrite-manifests", {}), tables)

    assert code == 0, payload
    assert "table_load" in payload["summary"]["timings"]


def test_the_sessions_own_catalog_settings_decide_not_its_start_up_configuration(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec
) -> None:
    # A session's catalogs come from its SQL configuration: what it started with and what was set on it
    # since (a shared session, a notebook). The SparkContext's start-up configuration misses the latter.
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=2)
    early = early_read.read_early(catalog, table)
    assert early is not None and early.agrees_with(tables.spark)
    key = f"spark.sql.catalog.{catalog.name}.client.region"
    tables.spark.conf.set(key, "nowhere-1")
    try:
        assert not early.agrees_with(tables.spark)
    finally:
        tables.spark.conf.unset(key)
    assert early.agrees_with(tables.spark)


@pytest.mark.parametrize("action", ["rewrite-files", "expire-snapshots"])
def test_a_commit_between_the_early_read_and_the_procedure_is_in_the_before_figures(
    make_table: TableFactory,
    tables: Tables,
    catalog: CatalogSpec,
    monkeypatch: pytest.MonkeyPatch,
    action: str,
) -> None:
    """Another writer commits after the job read its table and before the procedure runs: the figures
    before are the table the procedure started from, so a compaction keeps its live records and an
    expiry counts the snapshots it expired (no false alarm, no negative or missing count)."""
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=3)
    if action == "expire-snapshots":
        time.sleep(1.5)  # the first snapshot is then older than older-than: it expires
    read = early_read.read_early
    committed: list[dict[str, Any]] = []

    def read_then_commit(c: CatalogSpec, t: TableIdentifier) -> early_read.EarlyRead | None:
        early = read(c, t)
        tables.small_files(t, files=2)  # the concurrent writer's commit
        committed.append(_metrics_from_metadata_tables(tables.spark, t))
        return early

    monkeypatch.setattr(early_read, "read_early", read_then_commit)
    options = {
        "rewrite-files": {"min-input-files": 2},
        "expire-snapshots": {"older-than": "1s", "retain-last": 1, "allow-below-floor": True},
    }[action]

    code, payload = _run(_job(table, catalog, action, options), tables)

    assert code == 0, payload
    summary = payload["summary"]
    assert committed and "table_load" not in summary["timings"]
    before, after = summary["before"], summary["after"]
    assert before == committed[0]  # the table as the procedure found it
    assert after == _metrics_from_metadata_tables(tables.spark, table)
    assert before["live_records"] == after["live_records"] == tables.content(table)[0] == 5 * 20
    if action == "expire-snapshots":
        assert (before["snapshots"], after["snapshots"], summary["expired_snapshots"]) == (2, 1, 1)
    else:
        assert after["data_files"] == 2


def test_a_session_that_fails_to_start_while_the_table_is_read_gives_one_failure_line(
    make_table: TableFactory, tables: Tables, warehouse: Path, tmp_path: Path
) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p", prefix="nosession")
    tables.small_files(table, files=2)
    # A serializer class that does not exist: SparkContext's start fails in the driver, while the main
    # thread reads the table's metadata.
    broken = CatalogSpec(
        name="lake", warehouse=str(warehouse), properties={"spark.serializer": "no.such.Serializer"}
    )

    result = run_local(_job(table, broken, "rewrite-files", {}), tmp_path, timeout=300)

    assert not result.ok
    assert result.error_class != NO_RESULT, result.error  # a result line, not a timeout or a crash
    assert "no.such.Serializer" in (result.error or "")
    assert result.raw["exit_code"] == 1
    log = (tmp_path / "spark-submit.log").read_text()
    assert log.count('"tms_result":1') == 1
    assert parse_result(log.splitlines()).status == "FAILED"


@pytest.mark.on_demand(
    reason="tests/integration/spark/test_spark_submit.py::test_rewrite_files_via_spark_submit checks the "
    "spark-submit run's early read (no table_load, the metadata tables' figures) in its own JVM"
)
def test_a_spark_submit_run_reads_its_table_early(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec, tmp_path: Path
) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p", prefix="early")
    tables.small_files(table, files=3)
    expected = _metrics_from_metadata_tables(tables.spark, table)

    result = run_local(_job(table, catalog, "rewrite-files", {"min-input-files": 2}), tmp_path, timeout=300)

    assert result.ok, result.error
    assert "table_load" not in result.summary["timings"]
    assert result.summary["timings"]["session"] > 0
    assert result.summary["before"] == expected
    assert result.summary["after"]["data_files"] == 2


def test_a_spark_submit_run_loads_its_table_through_iceberg_on_the_first_try(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec, tmp_path: Path
) -> None:
    # No version hint: the early read has no plain answer, so the job's main thread loads the table through
    # the session the background thread started. Spark's active session is per thread: without it on the
    # main thread Iceberg's load found no catalog `lake` and the job fell back to Spark's catalog.
    table = make_table("id bigint, p string, v string", partitioned_by="p", prefix="firstload")
    tables.small_files(table, files=3)
    (tables.dir(table) / "metadata" / "version-hint.text").unlink()
    expected = _metrics_from_metadata_tables(tables.spark, table)

    result = run_local(_job(table, catalog, "rewrite-files", {"min-input-files": 2}), tmp_path, timeout=300)

    assert result.ok, result.error
    assert "table_load" in result.summary["timings"]
    log = (tmp_path / "spark-submit.log").read_text()
    assert "through Iceberg failed" not in log, [ln for ln in log.splitlines() if "Iceberg failed" in ln]
    assert result.summary["before"] == expected
    assert result.summary["after"]["data_files"] == 2
