"""Through a real ``spark-submit``: the job's result line, success and failure."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.formats.iceberg.marks import commits
from airflow_tablemgmt.spark.job.commit_mark import ACTION, ATTEMPT, PROCESS
from airflow_tablemgmt.spark.job.metrics import _metrics_from_metadata_tables
from airflow_tablemgmt.spark.launch.submit import run_local
from airflow_tablemgmt.spark.protocol import describe_exception
from tests.integration.spark.spark_tables import TableFactory, Tables, job_spec

pytestmark = pytest.mark.integration


def _job(table: TableIdentifier, catalog: CatalogSpec, action: str, raw: dict[str, object]) -> JobSpec:
    options = ACTIONS.get(action).settings(raw).options()  # exactly what a factory hands over
    return job_spec(table, catalog, action, options)


def test_rewrite_files_via_spark_submit(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec, tmp_path: Path
) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p", prefix="submitted")
    tables.small_files(table, files=12)
    before = tables.content(table)
    old_files = {p.name for p in (tables.dir(table) / "data").rglob("*.parquet")}
    expected = _metrics_from_metadata_tables(tables.spark, table)

    job = replace(_job(table, catalog, "rewrite-files", {"min-input-files": 2}), process_id=41, attempt=2)
    result = run_local(job, tmp_path, timeout=300)

    assert result.ok, result.error
    assert result.status == "SUCCESS"
    assert result.raw["action"] == "rewrite-files"
    assert result.raw["table"] == str(table)
    assert result.raw["exit_code"] == 0
    assert result.application_id and result.application_id.startswith("local-")
    summary = result.summary
    assert summary["before"]["data_files"] == 24
    # Read early, while the session started (no table_load phase), and the same figures Spark's own
    # metadata tables give.
    assert "table_load" not in summary["timings"] and summary["timings"]["session"] > 0
    assert summary["before"] == expected
    assert summary["after"]["data_files"] == 2
    assert summary["after"]["files_per_partition_max"] == 1
    assert summary["rewritten_data_files_count"] == 24
    assert summary["duration_seconds"] > 0
    # What the run cost, from the application's own stages (Spark's status store, its UI off): executor
    # time, the bytes its scans read (every old file, whole: at least their bytes) and the bytes it wrote,
    # which are exactly the two new files'.
    cost = summary["cost"]
    assert (cost["scope"], cost["source"]) == ("application", "status-store")
    assert cost["core_seconds"] > 0 and cost["cpu_seconds"] > 0 and cost["tasks"] >= 2
    assert summary["rewritten_bytes_count"] <= cost["bytes_read"] < 3 * summary["rewritten_bytes_count"]
    assert (
        cost["bytes_written"]
        == summary["after"]["data_bytes"]
        == sum(
            p.stat().st_size
            for p in (tables.dir(table) / "data").rglob("*.parquet")
            if p.name not in old_files
        )
    )
    assert tables.content(table) == before
    log = (tmp_path / "spark-submit.log").read_text()
    assert f"tablemgmt: rewriting data files of {table}" in log
    # The commit names the attempt that made it (Iceberg's driver-side mark), read back as recovery reads it.
    spec = TableSpec(catalog=table.catalog, namespace=table.namespace, name=table.name)
    mark, _, _ = next(iter(commits(spec, catalog)))
    assert (mark[PROCESS], mark[ATTEMPT], mark[ACTION]) == ("41", "2", "rewrite-files"), mark


def test_failing_job_reports_failed_with_the_cause(catalog: CatalogSpec, tmp_path: Path) -> None:
    missing = TableIdentifier("lake", "db", "does_not_exist")

    result = run_local(_job(missing, catalog, "expire-snapshots", {}), tmp_path, timeout=300)

    assert result.status == "FAILED"
    assert not result.ok
    assert result.error_class == "TableNotFound"
    assert result.error is not None
    assert "lake.db.does_not_exist" in result.error and "does not exist" in result.error
    assert result.raw["exit_code"] == 1
    assert result.summary == {}


def test_spark_errors_are_trimmed_to_their_message(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint")
    with pytest.raises(Exception) as err:
        tables.spark.sql(
            f"CALL lake.system.rewrite_data_files(table => '{table.in_catalog}', where => 'id ==== 1')"
        ).collect()

    error_class, message = describe_exception(err.value)

    assert error_class == "IllegalArgumentException"
    assert message.startswith("Cannot parse predicates in where option: id ==== 1")
    assert "\tat " not in message and "at org.apache" not in message
    assert len(message.splitlines()) <= 8
