"""The class-archive run's driver: ``spark-submit ... spark/job/warm_up.py <scratch directory>``.

A job's driver JVM maps a class-data archive of the classes Spark and Iceberg load
(``spark/launch/class_cache.py``). The JVM writes such an archive when it exits, which takes 10 s on a
quiet host and over 2 minutes under load; written at a maintenance job's exit, that time was the job's
(its worker slot and table lease held while the JVM dumped). The archive is written by this program
instead, in a run of its own that no job waits for (``spark/launch/archive_builder.py``), with the job's
JVM options and jars: it starts a session, and runs what a maintenance job runs — Iceberg's procedures
and metadata tables — on a scratch table in a hadoop catalog under the given directory, never a user's
table or catalog.

Whatever the Iceberg part raises is logged and the run still exits 0: the session's classes alone make
a useful archive (a job of a format without Iceberg's jar, say).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a file, Python puts this directory first on sys.path, where session.py, metrics.py ... would
# shadow top-level modules of the same name.
if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

CATALOG = "tms_class_archive"


def warm_up(scratch: Path) -> None:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("tablemgmt-class-archive")
    builder = builder.config(f"spark.sql.catalog.{CATALOG}", "org.apache.iceberg.spark.SparkCatalog")
    builder = builder.config(f"spark.sql.catalog.{CATALOG}.type", "hadoop")
    builder = builder.config(f"spark.sql.catalog.{CATALOG}.warehouse", str(scratch / "warehouse"))
    spark = builder.getOrCreate()
    try:
        _iceberg(spark)
    except Exception as e:  # noqa: BLE001 - the session's classes are archived all the same
        print(f"tablemgmt class archive: the Iceberg part failed ({str(e)[:300]})", file=sys.stderr)
    finally:
        spark.stop()


def _iceberg(spark) -> None:  # type: ignore[no-untyped-def]
    table = f"{CATALOG}.db.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.db")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {table} (id BIGINT, p STRING, v STRING) USING iceberg PARTITIONED BY (p)"
    )
    for i in range(3):
        spark.range(i * 100, (i + 1) * 100, 1, 2).selectExpr(
            "id", "cast(id % 2 AS string) AS p", "cast(id AS string) AS v"
        ).writeTo(table).append()
    for query in (
        f"SELECT count(*), sum(file_size_in_bytes) FROM {table}.files",
        f"SELECT * FROM {table}.snapshots",
        f"SELECT * FROM {table}.manifests",
        f"SELECT * FROM {table}.metadata_log_entries",
        f"CALL {CATALOG}.system.rewrite_data_files(table => 'db.t', options => map('min-input-files', '2'))",
        f"CALL {CATALOG}.system.rewrite_manifests('db.t')",
        f"CALL {CATALOG}.system.expire_snapshots(table => 'db.t', retain_last => 1)",
        f"CALL {CATALOG}.system.remove_orphan_files(table => 'db.t', dry_run => true)",
    ):
        spark.sql(query).collect()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: warm_up.py <scratch directory>", file=sys.stderr)
        return 2
    warm_up(Path(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
