"""The Hudi scenario (run by test_hudi_actions.py in a child process): a merge-on-read table written by
Spark, then compaction in RFC-43's two phases (scheduled and executed by one job; then a retry of an attempt
that died after scheduling executes that instant); with ``full`` also clean, z-order clustering and archive.
Each job is made by the Hudi factory and run through the job's entry."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.formats.hudi.factory import HudiProcessFactory
from airflow_tablemgmt.formats.hudi.metadata import read_timeline
from tests.integration.formats.format_jobs import format_catalog, run_job, start_session, step

NOW = datetime(2026, 11, 25, tzinfo=UTC)
WRITE = {
    "hoodie.table.name": "events",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.partitionpath.field": "part",
    # the writer runs no table service of its own: they are this service's work
    "hoodie.compact.inline": "false",
    "hoodie.datasource.compaction.async.enable": "false",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
    "hoodie.insert.shuffle.parallelism": "2",
    "hoodie.upsert.shuffle.parallelism": "2",
}


def main(warehouse: Path, full: bool) -> None:
    catalog = format_catalog(warehouse, "hudi")
    location = str(warehouse / "app" / "events")
    spark = start_session("hudi")

    def write(first: int, count: int, ts: int, operation: str) -> None:
        (
            spark.range(first, first + count)
            .selectExpr("id", "CAST(id % 2 AS INT) AS part", f"{ts} AS ts", f"concat('v{ts}-', id) AS v")
            .write.format("hudi")
            .options(**WRITE)
            .option("hoodie.datasource.write.operation", operation)
            .mode("append")
            .save(location)
        )

    def read_back() -> dict:
        row = (
            spark.read.format("hudi")
            .load(location)
            .selectExpr("count(*) AS n", "sum(hash(id, v)) AS checksum")
            .collect()[0]
        )
        return {"rows": row["n"], "checksum": row["checksum"], **read_timeline(location).summary()}

    t0 = time.perf_counter()
    write(0, 40, 0, "insert")
    write(0, 20, 1, "upsert")
    if full:  # CI proves the two phases on the fewest commits; the full run's clustering wants more log files
        write(10, 20, 2, "upsert")
    step("written", seconds=round(time.perf_counter() - t0, 2))

    factory = HudiProcessFactory()
    context = TriggerContext(instant=NOW, catalog=catalog)
    spec = TableSpec(
        catalog="lake",
        namespace="app",
        name="events",
        format="hudi",
        actions={
            "compaction": {"min-delta-commits": 2},
            "clean": {"retain-commits": 1},
            "clustering": {"sort-columns": ["v", "id"], "layout": "z-order"},
            # the scenario's table is small: a timeline of 3 commits is kept, 4 trigger archiving
            "archive": {"min-commits": 3, "max-commits": 4, "retain-commits": 2, "allow-below-floor": True},
        },
    )

    before = read_back()
    job = factory.trigger(spec, "compaction", context)
    t = time.perf_counter()
    result = run_job(spark, job)
    step(
        "compaction",
        job=job.to_json_dict(),
        result=result,
        wall=round(time.perf_counter() - t, 2),
        before=before,
        after=read_back(),
    )
    step(
        "compaction_again",
        job=None if (j := factory.trigger(spec, "compaction", context)) is None else j.options,
    )

    # an attempt that died between the phases: its instant is scheduled, not executed
    write(20, 20, 3, "upsert")
    if full:
        write(0, 10, 4, "upsert")
    spark.sql(
        f"CALL run_compaction(op => 'schedule', path => '{location}', "
        "options => 'hoodie.compact.inline.max.delta.commits=1')"
    ).collect()
    died = read_timeline(location).pending_compactions()
    process = Process(7, "lake.app.events", "compaction", NOW, ProcessStatus.RUNNING, attempt=1)
    retry = factory.recover(spec, process, context)
    before = read_back()
    t = time.perf_counter()
    result = run_job(spark, retry)
    step(
        "compaction_retry",
        died=died,
        completed_compactions=read_timeline(location).completed_compactions(),
        job=retry.to_json_dict(),
        result=result,
        wall=round(time.perf_counter() - t, 2),
        before=before,
        after=read_back(),
    )

    if not full:
        spark.stop()
        return

    before = read_back()
    job = factory.trigger(spec, "clean", context)
    t = time.perf_counter()
    result = run_job(spark, job)
    step(
        "clean",
        result=result,
        wall=round(time.perf_counter() - t, 2),
        before=before,
        after=read_back(),
        cleans=read_timeline(location).count("clean"),
    )
    before = read_back()
    job = factory.trigger(spec, "clustering", context)
    t = time.perf_counter()
    result = run_job(spark, job)
    step(
        "clustering",
        result=result,
        wall=round(time.perf_counter() - t, 2),
        before=before,
        after=read_back(),
        replacecommits=read_timeline(location).count("replacecommit"),
    )
    again = factory.trigger(spec, "clustering", context)
    step("clustering_again", job=None if again is None else again.options)

    # a writer's commit after the maintenance (the metadata table on, Hudi's default, as everywhere here)
    write(30, 10, 5, "upsert")
    before = {**read_back(), "data_files": data_files(location)}
    job = factory.trigger(spec, "archive", context)
    t = time.perf_counter()
    result = run_job(spark, job)
    step(
        "archive",
        result=result,
        wall=round(time.perf_counter() - t, 2),
        before=before,
        after={**read_back(), "data_files": data_files(location)},
        history=sorted(p.name for p in (Path(location) / ".hoodie" / "timeline" / "history").glob("*")),
    )
    again = factory.trigger(spec, "archive", context)
    step("archive_again", job=None if again is None else again.options)

    spark.stop()


def data_files(location: str) -> list[str]:
    """The table's base and log files on disk (archive deletes none)."""
    root = Path(location)
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file()
        and ".hoodie" not in p.parts
        and not p.name.endswith(".crc")
        and (p.suffix == ".parquet" or ".log." in p.name)
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), full=len(sys.argv) > 2 and sys.argv[2] == "full")
