"""Clustering after a clean on a merge-on-read Hudi table written with Hudi's defaults (its metadata table on,
with its files, column-stats and partition-stats indexes): an insert, updates into log files, Hudi's own
compaction, more updates (``hudi_defaults_scenario.py``'s ``write-mor``), then our clean, which removes the
older file slices (and so writes delete records into the metadata table's column-stats partition), and our
clustering, each a real spark-submit as a worker runs it. The rows and their checksum are read back by Hudi
in a JVM of its own.

Why it could fail: Hudi 1.0.2 reads a metadata log's delete block with Avro's ``SpecificDatumReader``, which
finds ``HoodieDeleteRecordList`` through its own (the application) class loader and then the thread's context
class loader, and it reads the metadata table's file groups on parallel streams (ForkJoin pool threads, whose
context class loader is the application loader). With the bundle in ``--jars`` alone (Spark's child loader)
that lookup fails and Avro returns a generic record: ``ClassCastException: GenericData$Record cannot be cast
to HoodieDeleteRecordList`` (apache/hudi#13410; Hudi's fix, PR 13990, reads the block generically). The
launch now puts the bundle on the driver's class path too (``spark/launch/artifacts.py``). With the launch
before that (efca46f) this sequence's clean passed and the clustering failed at its commit, 2026-11-28:
``HoodieClusteringException: unable to transition clustering inflight to complete``, caused by
``ClassCastException: class org.apache.avro.generic.GenericData$Record cannot be cast to class
org.apache.hudi.avro.model.HoodieDeleteRecord``; with the current launch it passes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.formats.hudi.metadata import read_timeline
from tests.integration.formats.format_jobs import run_scenario

pytestmark = pytest.mark.integration
SCENARIO = "tests.integration.formats.hudi_defaults_scenario"


def _run(spec: TableSpec, action: str, context: TriggerContext) -> Any:
    """The factory's job for ``action``, submitted through SparkJobHook (spark-submit), as a worker does."""
    from airflow_tablemgmt.hooks.spark_job import SparkJobHook

    job = default_factories().for_action("hudi", action).trigger(spec, action, context)
    assert job is not None, f"{action}: the factory skipped it"
    return SparkJobHook().submit(JobSpec(**{**job.to_json_dict(), "process_id": 1}))


@pytest.mark.on_demand(
    reason="a Hudi writer JVM and two spark-submits (≈ 4 min quiet, far more under load); CI: the launch's "
    "class path in tests/unit/spark/launch/test_hudi_driver_class_path.py and the merge-on-read compaction "
    "of a default-written table (metadata table on) in test_hudi_actions.py"
)
@pytest.mark.timeout(1800)
def test_clustering_after_a_clean_on_a_merge_on_read_table_written_with_hudis_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    location = tmp_path / "wh" / "app" / "events"
    written = run_scenario(SCENARIO, location, "write-mor", timeout=1500)["write-mor"]
    metadata = location / ".hoodie" / "metadata"
    assert (metadata / "column_stats").is_dir(), "Hudi's default: the metadata table with its column stats"
    assert read_timeline(str(location)).completed_compactions(), (
        "the writer's compaction made new file slices"
    )
    spec = TableSpec(
        catalog="lake",
        namespace="app",
        name="events",
        format="hudi",
        actions={"clean": {"retain-commits": 1}, "clustering": {"sort-columns": ["v", "id"]}},
    )
    context = TriggerContext(
        instant=datetime(2026, 11, 28, tzinfo=UTC),
        catalog=CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")),
    )

    clean = _run(spec, "clean", context)
    assert clean.ok, clean.error
    assert clean.summary["deleted_files"] > 0, clean.summary  # whole file slices removed
    assert read_timeline(str(location)).count("clean") == 1

    clustering = _run(spec, "clustering", context)
    assert clustering.ok, clustering.error
    assert clustering.summary["states"] == ["COMPLETED"], clustering.summary
    assert read_timeline(str(location)).count("replacecommit") == 1
    after = run_scenario(SCENARIO, location, "read")["read"]
    assert (
        (after["rows"], after["checksum"])
        == (written["rows"], written["checksum"])
        == (40, written["checksum"])
    )
