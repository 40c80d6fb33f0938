"""The Hudi scenario on S3 (run by test_hudi_s3.py in a child process, against the SeaweedFS the test
started): a merge-on-read table written by Spark at ``s3a://<bucket>/lake/app/events``; the factory reads its
timeline from S3 without a JVM (pyarrow, the catalog's ``spark.hadoop.fs.s3a.*`` with the secrets as ``env:``
references resolved as the worker resolves them), schedules and executes a compaction through the job's entry,
then skips the next one (nothing new since it). Rows and a checksum by a snapshot query before and after."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.formats.hudi.factory import HudiProcessFactory
from airflow_tablemgmt.formats.hudi.metadata import hudi_health
from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
from tests.integration.formats.delta_s3_scenario import s3_catalog
from tests.integration.formats.format_jobs import run_job, start_session, step
from tests.integration.formats.hudi_scenario import WRITE

NOW = datetime(2026, 11, 26, tzinfo=UTC)


def main(warehouse: str, endpoint: str) -> None:
    catalog = s3_catalog(warehouse, endpoint)
    resolved = resolve_catalog_spec(catalog)
    location = f"{warehouse}/app/events"
    spark = start_session("hudi", resolved)

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
        return {"rows": row["n"], "checksum": row["checksum"], **hudi_health(location, resolved.properties)}

    t0 = time.perf_counter()
    write(0, 40, 0, "insert")
    write(0, 20, 1, "upsert")
    step("written", seconds=round(time.perf_counter() - t0, 2))
    factory = HudiProcessFactory()
    context = TriggerContext(instant=NOW, catalog=catalog, resolve_catalog=resolve_catalog_spec)
    spec = TableSpec(
        catalog="lake",
        namespace="app",
        name="events",
        format="hudi",
        actions={"compaction": {"min-delta-commits": 3}},
    )
    step(
        "below_threshold",
        job=None if (j := factory.trigger(spec, "compaction", context)) is None else j.options,
    )
    write(20, 20, 2, "upsert")
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
    spark.stop()


if __name__ == "__main__":  # argv: a local scratch directory (unused), the s3a:// warehouse, the endpoint
    main(sys.argv[2], sys.argv[3])
