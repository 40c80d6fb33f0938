"""Fault scenarios of the path-based formats, run by ``tests/faults/test_hudi_faults.py`` in child
processes (one Hudi session each):

* ``<warehouse> hudi-compact``: writes a merge-on-read table, reads it back, then runs the factory's
  compaction job (schedule, then execute) -- the parent kills this process's driver JVM with SIGKILL
  while it runs;
* ``<warehouse> hudi-recover``: the retry of that process (``factory.recover``), and the table read back.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.tables import TableSpec
from tests.integration.formats.format_jobs import format_catalog, run_job, start_session, step
from tests.integration.formats.hudi_scenario import WRITE

NOW = datetime(2026, 11, 25, tzinfo=UTC)
HUDI_ACTIONS = {
    "compaction": {"min-delta-commits": 1},
    "clean": {"retain-commits": 1},
    "clustering": {"sort-columns": ["id"]},
    "archive": {"min-commits": 3, "max-commits": 4, "retain-commits": 2, "allow-below-floor": True},
}


def hudi_spec() -> TableSpec:
    return TableSpec(catalog="lake", namespace="app", name="events", format="hudi", actions=HUDI_ACTIONS)


def hudi_write(spark: Any, location: str, ids: range, ts: int, operation: str) -> None:
    (
        spark.range(ids.start, ids.stop)
        .selectExpr("id", "CAST(id % 2 AS INT) AS part", f"{ts} AS ts", f"concat('v{ts}-', id) AS v")
        .write.format("hudi")
        .options(**WRITE)
        .option("hoodie.datasource.write.operation", operation)
        .mode("append")
        .save(location)
    )


def hudi_read(spark: Any, location: str) -> dict[str, Any]:
    row = (
        spark.read.format("hudi")
        .load(location)
        .selectExpr("count(*) AS n", "count(DISTINCT id) AS ids", "sum(hash(id, v)) AS checksum")
        .collect()[0]
    )
    return {"rows": row["n"], "ids": row["ids"], "checksum": row["checksum"]}


def hudi_compact(warehouse: Path) -> None:
    from airflow_tablemgmt.formats.hudi.factory import HudiProcessFactory

    location = str(warehouse / "app" / "events")
    spark = start_session("hudi")
    hudi_write(spark, location, range(0, 40), 0, "insert")
    hudi_write(spark, location, range(0, 20), 1, "upsert")
    hudi_write(spark, location, range(10, 30), 2, "upsert")
    step("before", read=hudi_read(spark, location))
    job = HudiProcessFactory().trigger(
        hudi_spec(), "compaction", TriggerContext(NOW, format_catalog(warehouse, "hudi"))
    )
    step("compaction_started", job=job.to_json_dict())
    step("compaction_done", result=run_job(spark, job))  # not reached when the kill lands in time


def hudi_recover(warehouse: Path) -> None:
    from airflow_tablemgmt.formats.hudi.factory import HudiProcessFactory

    location = str(warehouse / "app" / "events")
    spark = start_session("hudi")
    process = Process(1, "lake.app.events", "compaction", NOW, ProcessStatus.RUNNING, attempt=1)
    job = HudiProcessFactory().recover(
        hudi_spec(), process, TriggerContext(NOW, format_catalog(warehouse, "hudi"))
    )
    step("retry", job=job.to_json_dict(), result=run_job(spark, job), read=hudi_read(spark, location))


if __name__ == "__main__":  # argv: the warehouse directory, the scenario
    {
        "hudi-compact": hudi_compact,
        "hudi-recover": hudi_recover,
    }[sys.argv[2]](Path(sys.argv[1]))
