"""The Delta scenario on S3 (run by test_delta_s3.py in a child process, against the SeaweedFS the test
started): a partitioned table written by Spark at ``s3a://<bucket>/lake/sales/orders``, then the factory's
optimize (decided from the log read on S3 without a JVM: files were added, so it runs; right after it,
nothing new, so it is skipped) and vacuum (the first run: a dry run), each through the job's entry in a
session built for the catalog: Delta's jars and ``hadoop-aws``, the ``spark.hadoop.fs.s3a.*`` properties
with the secret as an ``env:`` reference (resolved for the factory's read as the worker resolves it)."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.formats.delta.factory import DeltaProcessFactory
from airflow_tablemgmt.formats.delta.metadata import read_delta
from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
from tests.integration.formats.format_jobs import run_job, start_session, step

NOW = datetime(2026, 11, 25, tzinfo=UTC)
SECRET_ENV = "TMS_DELTA_S3_SECRET"
ACCESS_ENV = "TMS_DELTA_S3_ACCESS"


def s3_catalog(warehouse: str, endpoint: str) -> CatalogSpec:
    return CatalogSpec(
        name="lake",
        type="hadoop",
        warehouse=warehouse,
        properties={
            "spark.hadoop.fs.s3a.endpoint": endpoint,
            "spark.hadoop.fs.s3a.access.key": f"env:{ACCESS_ENV}",
            "spark.hadoop.fs.s3a.secret.key": f"env:{SECRET_ENV}",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        },
    )


def main(warehouse: str, endpoint: str) -> None:
    catalog = s3_catalog(warehouse, endpoint)
    location = f"{warehouse}/sales/orders"
    spark = start_session("delta", resolve_catalog_spec(catalog))
    t0 = time.perf_counter()
    for i in range(3):
        (
            spark.range(i * 50, i * 50 + 50)
            .selectExpr("id", "CAST(id % 2 AS INT) AS part", "CAST(id * 7 % 13 AS BIGINT) AS v")
            .repartition(3)
            .write.format("delta")
            .partitionBy("part")
            .mode("append")
            .save(location)
        )
    step("written", seconds=round(time.perf_counter() - t0, 2))
    factory = DeltaProcessFactory()
    context = TriggerContext(instant=NOW, catalog=catalog, resolve_catalog=resolve_catalog_spec)
    step("read_without_jvm", figures=read_delta(location, resolve_catalog_spec(catalog).properties).summary())
    spec = TableSpec(
        catalog="lake",
        namespace="sales",
        name="orders",
        format="delta",
        actions={"optimize": {}, "vacuum": {}},
    )
    for action in ("optimize", "vacuum"):
        job = factory.trigger(spec, action, context)
        t = time.perf_counter()
        result = run_job(spark, job)
        step(action, job=job.to_json_dict(), result=result, wall=round(time.perf_counter() - t, 2))
        if action == "optimize":
            again = factory.trigger(spec, action, context)
            step("optimize_again", job=None if again is None else again.options)
    spark.stop()


if __name__ == "__main__":  # argv: a local scratch directory (unused), the s3a:// warehouse, the endpoint
    main(sys.argv[2], sys.argv[3])
