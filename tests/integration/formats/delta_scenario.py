"""The Delta scenario (run by test_delta.py in a child process): a partitioned table written by Spark,
then optimize (bin-pack, then Z-order in one partition), vacuum (the first-run dry run, then for real) and
a vacuum below Delta's retention check, each job made by the Delta factory and run through the job's entry."""

from __future__ import annotations

import os
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.formats.delta.factory import DeltaProcessFactory
from airflow_tablemgmt.formats.delta.metadata import read_delta
from tests.integration.formats.format_jobs import format_catalog, run_job, start_session, step

NOW = datetime(2026, 11, 25, tzinfo=UTC)
# TABLEMGMT_FORMAT_TIMINGS=1 adds the bare procedures (wall time against the job's); CI runs without them.
TIMINGS = os.environ.get("TABLEMGMT_FORMAT_TIMINGS") == "1"


def rows_and_checksum(location: Path) -> tuple[int, str]:
    """Rows of the live files (from the ``_delta_log``, read without Spark) and a digest of their
    (id, v) values, order-free: read from the Parquet files themselves."""
    import hashlib

    import pyarrow.parquet as pq

    values: list[tuple[int, int]] = []
    for path in read_delta(str(location)).files:
        table = pq.read_table(location / path, columns=["id", "v"])
        values += list(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))
    return len(values), hashlib.sha256(repr(sorted(values)).encode()).hexdigest()


def read_back(location: Path) -> dict:
    state = read_delta(str(location))
    rows, digest = rows_and_checksum(location)
    return {"version": state.version, "files": state.data_files, "rows": rows, "checksum": digest}


def backdate(root: Path, seconds: float) -> None:
    """Every data file's mtime ``seconds`` in the past (VACUUM judges untracked files by it)."""
    past = time.time() - seconds
    for dirpath, _, names in os.walk(root):
        if "_delta_log" in dirpath:
            continue
        for n in names:
            os.utime(Path(dirpath) / n, (past, past))


def main(warehouse: Path) -> None:
    catalog = format_catalog(warehouse, "delta")
    location = warehouse / "sales" / "orders"
    spark = start_session("delta")
    t0 = time.perf_counter()
    for i in range(4):
        (
            spark.range(i * 50, i * 50 + 50)
            .selectExpr("id", "CAST(id % 2 AS INT) AS part", "CAST(id * 7 % 13 AS BIGINT) AS v")
            .repartition(3)
            .write.format("delta")
            .partitionBy("part")
            .mode("append")
            .save(str(location))
        )
    spark.sql(f"DELETE FROM delta.`{location}` WHERE id = 3")
    step("written", seconds=round(time.perf_counter() - t0, 2))

    factory = DeltaProcessFactory()
    context = TriggerContext(instant=NOW, catalog=catalog)

    def spec(actions: dict) -> TableSpec:
        return TableSpec(catalog="lake", namespace="sales", name="orders", format="delta", actions=actions)

    # optimize, bin-pack, through the factory (the log shows new files, so it pays)
    job = factory.trigger(spec({"optimize": {}}), "optimize", context)
    step("optimize_job", job=None if job is None else job.to_json_dict())
    before = read_back(location)
    t = time.perf_counter()
    result = run_job(spark, job)
    step(
        "optimize",
        result=result,
        wall=round(time.perf_counter() - t, 2),
        before=before,
        after=read_back(location),
    )
    # nothing written since: the factory skips without a JVM
    again = factory.trigger(spec({"optimize": {}}), "optimize", context)
    step("optimize_again", job=None if again is None else again.to_json_dict())

    spark.range(1000, 1040).selectExpr("id", "CAST(id % 2 AS INT) AS part", "id AS v").repartition(
        4
    ).write.format("delta").partitionBy("part").mode("append").save(str(location))
    z = factory.trigger(
        spec({"optimize": {"zorder-by": ["v"], "partition-filter": {"part": 0}}}), "optimize", context
    )
    before = read_back(location)
    t = time.perf_counter()
    result = run_job(spark, z)
    step(
        "zorder",
        result=result,
        wall=round(time.perf_counter() - t, 2),
        before=before,
        after=read_back(location),
    )
    spark.range(2000, 2040).selectExpr("id", "CAST(id % 2 AS INT) AS part", "id AS v").repartition(
        4
    ).write.format("delta").partitionBy("part").mode("append").save(str(location))
    t = time.perf_counter()
    spark.sql(f"OPTIMIZE delta.`{location}`").collect()
    step("bare_optimize", wall=round(time.perf_counter() - t, 2))

    # vacuum: the table keeps removed files 1 hour. The files OPTIMIZE removed were removed just now (their
    # tombstones protect them); a crashed writer left three files no version references, 2 hours ago.
    spark.sql(
        f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 1 hours')"
    )
    live = sorted(read_delta(str(location)).files)
    orphans = [f"part=0/orphan-{i}.parquet" for i in range(3)]
    for orphan in orphans:
        shutil.copyfile(location / live[0], location / orphan)
    backdate(location, 2 * 3600)
    step("vacuum_setup", orphans=orphans, live=live)
    first = factory.trigger(spec({"vacuum": {}}), "vacuum", context)
    step("vacuum_dry", result=run_job(spark, first))
    last = Process(
        1, "lake.sales.orders", "vacuum", NOW, ProcessStatus.SUCCESS, parameters={"options": first.options}
    )
    real = factory.trigger(spec({"vacuum": {}}), "vacuum", TriggerContext(NOW, catalog, last_success=last))
    before = read_back(location)
    t = time.perf_counter()
    result = run_job(spark, real)
    step(
        "vacuum",
        result=result,
        wall=round(time.perf_counter() - t, 2),
        before=before,
        after=read_back(location),
    )
    if TIMINGS:
        t = time.perf_counter()
        spark.sql(f"VACUUM delta.`{location}`").collect()
        step("bare_vacuum", wall=round(time.perf_counter() - t, 2))

    # below the table's retention (now 2 hours): Delta's check refuses, the job fails with its message
    spark.sql(
        f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 2 hours')"
    )
    low = spec({"vacuum": {"retain": "1h", "allow-below-floor": True, "confirm": True}})
    step("vacuum_below_check", result=run_job(spark, factory.trigger(low, "vacuum", context)))
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
