"""Where a run's time goes: the ``timings`` of its summary, in process and through spark-submit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.job import main as job_main
from airflow_tablemgmt.spark.launch.submit import run_local
from airflow_tablemgmt.spark.protocol import PHASE_NAMES, parse_result
from tests.integration.spark.spark_tables import TableFactory, Tables, job_spec

pytestmark = pytest.mark.integration


def _job(table: TableIdentifier, catalog: CatalogSpec, action: str, options: dict[str, Any]) -> JobSpec:
    return job_spec(table, catalog, action, options, process_id=3)


def test_in_process_run_times_the_maintainer_phases(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec
) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=6)

    code, line = job_main.run(_job(table, catalog, "rewrite-files", {"min-input-files": 2}), tables.spark)

    assert code == 0, line
    summary = parse_result([line]).summary
    timings = summary["timings"]
    assert {"metrics_before", "procedure", "metrics_after", "maintainer_other"} <= set(timings)
    # The hadoop table was read without Spark (its figures before included): no Spark-side load.
    assert "table_load" not in timings
    assert "session" not in timings  # the caller's session: not started, not timed
    assert all(v >= 0 for v in timings.values())
    # The maintainer's own time is its phases plus the rest; the early read (metrics_before) came first.
    inside = timings["procedure"] + timings["metrics_after"] + timings["maintainer_other"]
    assert inside <= summary["duration_seconds"] + 0.01
    assert inside + timings["metrics_before"] >= summary["duration_seconds"] - 0.01
    assert summary["after"]["data_files"] == 2  # the figures are still all there
    # On the caller's session (shared by every test here) the cost is this run's tagged jobs only: it wrote
    # exactly its two new files, whatever the session ran before (the tables' writes, other tests' jobs).
    cost = summary["cost"]
    assert cost["scope"] == "jobs" and cost["jobs"] >= 1 and cost["core_seconds"] > 0
    assert cost["bytes_written"] == summary["after"]["data_bytes"]
    assert not any("tms-cost" in t for t in tables.spark.sparkContext.getJobTags())  # the tag is taken off


def test_a_failed_run_reports_how_far_it_got(tables: Tables, catalog: CatalogSpec) -> None:
    missing = TableIdentifier("lake", "db", "no_such_table_for_timings")

    code, line = job_main.run(_job(missing, catalog, "expire-snapshots", {}), tables.spark)

    assert code == 1
    payload = json.loads(line)
    assert payload["error_class"] == "TableNotFound"
    # The early read found nothing plain; Spark's table load said the table is missing.
    assert "table_load" in payload["timings"] and "procedure" not in payload["timings"]
    # What it cost so far (its table load's jobs: none here, the early read used no Spark) is beside the error.
    assert payload["cost"]["scope"] == "jobs" and payload["cost"]["bytes_written"] == 0


def test_spark_submit_run_reports_every_phase_and_logs_them(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec, tmp_path: Path
) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p", prefix="timed")
    tables.small_files(table, files=3)

    result = run_local(_job(table, catalog, "expire-snapshots", {}), tmp_path, timeout=300)

    assert result.ok, result.error
    timings = result.summary["timings"]
    # No table_load: the job read its hadoop table while the session started.
    job_side = {"python_startup", "imports", "driver_jvm", "session", "metrics_before"}
    job_side |= {"procedure", "metrics_after", "maintainer_other", "session_stop"}
    submit_side = {"hook_setup", "spark_submit", "jvm_exit", "result_parse", "total"}
    assert job_side | submit_side <= set(timings), sorted(timings)
    assert set(timings) <= set(PHASE_NAMES) | {"total"}
    # Phases do not overlap: together they fit in the whole (the gaps are unmeasured glue).
    assert sum(v for k, v in timings.items() if k != "total") <= timings["total"] + 0.05
    assert timings["procedure"] > 0 and timings["session"] > 0
    log = (tmp_path / "spark-submit.log").read_text()
    assert "tablemgmt: timings: driver JVM to Python" in log and "procedure" in log
