"""Clustering after a clean on a Hudi table written with Hudi's defaults (its metadata table on), each job a
real spark-submit as a worker runs it. Hudi's bundle reaches the driver through ``--jars`` and, for Hudi, on
the driver's class path too (``spark/launch/artifacts.py``): through ``--jars`` alone, clustering failed once a
clean had run, reading the metadata table (``ClassCastException: GenericData$Record cannot be cast to
HoodieDeleteRecordList``). The rows and their checksum are read back by Hudi in a JVM of its own.

On this small copy-on-write table the clean writes delete records into the metadata table's column-stats
partition and the clustering reads and updates it; the ClassCastException did not show here through ``--jars``
alone either (checked by running this test with the old launch: passed), so this test proves the recipe end to
end on Hudi's defaults, and ``tests/unit/spark/launch/test_hudi_driver_class_path.py`` the launch itself."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.formats.hudi.factory import HudiProcessFactory
from airflow_tablemgmt.formats.hudi.metadata import read_timeline
from tests.integration.formats.format_jobs import run_scenario

pytestmark = pytest.mark.integration
SCENARIO = "tests.integration.formats.hudi_defaults_scenario"


def _submit(job: JobSpec) -> object:
    from airflow_tablemgmt.hooks.spark_job import SparkJobHook

    return SparkJobHook().submit(JobSpec(**{**job.to_json_dict(), "process_id": 1}))


@pytest.mark.on_demand(
    reason="two Hudi JVMs and two spark-submits (≈ 4 min quiet, 10 min at load 15); CI: the launch's class path "
    "in tests/unit/spark/launch/test_hudi_driver_class_path.py and a default-written table's compaction in "
    "test_hudi_actions.py"
)
@pytest.mark.timeout(1200)
def test_clustering_after_a_clean_on_a_table_written_with_hudis_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    location = tmp_path / "wh" / "app" / "events"
    written = run_scenario(SCENARIO, location, "write")["write"]
    assert (location / ".hoodie" / "metadata").is_dir()  # Hudi's default: the metadata table is on
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
    factory = HudiProcessFactory()

    clean = _submit(factory.trigger(spec, "clean", context))  # type: ignore[arg-type]
    assert clean.ok, clean.error  # type: ignore[attr-defined]
    assert read_timeline(str(location)).count("clean") >= 1

    clustering = _submit(factory.trigger(spec, "clustering", context))  # type: ignore[arg-type]
    assert clustering.ok, clustering.error  # type: ignore[attr-defined]
    assert read_timeline(str(location)).count("replacecommit") >= 1
    after = run_scenario(SCENARIO, location, "read")["read"]
    assert (
        (after["rows"], after["checksum"])
        == (written["rows"], written["checksum"])
        == (40, written["checksum"])
    )
