"""Create the demo's Iceberg table: many small data files across a few day partitions.

Runs Spark in-process (local[2]) against a hadoop warehouse. Used by `make demo` and the e2e tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def spark_session(warehouse: str, catalog: str = "demo", remote: str | None = None):  # type: ignore[no-untyped-def]
    """A local Spark (local[2]), or with ``remote`` (``sc://host:port``) a new session on that Spark
    Connect server with the catalog set as session settings (the tests' warm table writer)."""
    from airflow_tablemgmt.core.tables import CatalogSpec

    if remote:
        from airflow_tablemgmt.spark.connect.client import open_session
        from airflow_tablemgmt.spark.connect.config import set_conf
        from airflow_tablemgmt.spark.connect.session import connect_conf

        session = open_session(remote)
        set_conf(session, connect_conf(CatalogSpec(name=catalog, type="hadoop", warehouse=warehouse)))
        return session

    from airflow_tablemgmt.hooks.airflow_settings import artifact_settings
    from airflow_tablemgmt.spark.conf import base_conf, catalog_conf
    from airflow_tablemgmt.spark.launch.artifacts import iceberg_runtime_jar
    from airflow_tablemgmt.spark.launch.java import resolve_java_home

    os.environ.setdefault("JAVA_HOME", resolve_java_home())
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("tablemgmt-demo-data")
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    conf = {**base_conf(), **catalog_conf(CatalogSpec(name=catalog, type="hadoop", warehouse=warehouse))}
    conf["spark.jars"] = str(
        iceberg_runtime_jar(artifact_settings())
    )  # the wheel's, the jar cache's, or fetched from Maven
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def create_table(spark, table: str, files: int, rows: int, days: int = 4, appends: int = 3) -> None:  # type: ignore[no-untyped-def]
    """``appends`` commits, together at least ``files`` data files, partitioned by day."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect import functions as F
    else:
        from pyspark.sql import functions as F

    catalog, namespace, name = table.split(".")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{catalog}`.`{namespace}`")
    spark.sql(f"DROP TABLE IF EXISTS `{catalog}`.`{namespace}`.`{name}`")
    spark.sql(
        f"CREATE TABLE `{catalog}`.`{namespace}`.`{name}` "
        "(id BIGINT, event_ts TIMESTAMP, day DATE, user_id INT, kind STRING, amount DOUBLE) USING iceberg "
        "PARTITIONED BY (day) TBLPROPERTIES ('format-version'='2', 'write.spark.fanout.enabled'='true', "
        "'write.distribution-mode'='none', 'write.delete.mode'='merge-on-read', "
        "'write.delete.granularity'='partition')"
    )
    # Each Spark task writes one file per day it holds rows of: tasks x days files per append.
    tasks = max(1, -(-files // (days * appends)))
    per_append = max(rows // appends, tasks * days)
    for a in range(appends):
        ids = spark.range(a * per_append, (a + 1) * per_append)
        day = F.date_sub(F.current_date(), (F.col("id") % days).cast("int"))
        df = _events(ids, day, F).repartition(tasks)
        df.writeTo(f"`{catalog}`.`{namespace}`.`{name}`").append()


# One DELETE at partition granularity leaves one position delete file per partition, fewer than
# rewrite-deletes' min-input-files (2 in the demo, 5 by default), so it had nothing to compact.
# Several DELETE commits leave several delete files per partition, as a stream of deletes would.
DELETE_COMMITS = 3


def add_position_deletes(spark, table: str, every: int, commits: int = 1) -> None:  # type: ignore[no-untyped-def]
    """Delete every ``every``-th row with merge-on-read, over ``commits`` DELETE commits.

    Iceberg writes position delete files; commit ``k`` deletes the rows whose ``pmod(hash(id),
    every)`` is ``k``, so together they delete about ``commits`` rows in every ``every``. A hash,
    not ``id % every``: the day partition is ``id % days``, so ``id % every = k`` would hit only
    the partitions of k's parity and leave the others with a single delete file.
    """
    catalog, namespace, name = table.split(".")
    for k in range(commits):
        spark.sql(
            f"DELETE FROM `{catalog}`.`{namespace}`.`{name}` WHERE pmod(hash(id), {int(every)}) = {int(k)}"
        )


def _events(ids, day, F):  # type: ignore[no-untyped-def]
    """The demo's event columns over ``ids`` (a ``spark.range``), on the day ``day`` (a column)."""
    return (
        ids.withColumn("day", day)
        .withColumn(
            "event_ts", F.to_timestamp(F.col("day")) + F.expr("make_interval(0,0,0,0,0,0,id % 86400)")
        )
        .withColumn("user_id", (F.col("id") * 7919 % 10007).cast("int"))
        .withColumn(
            "kind",
            F.element_at(
                F.array(F.lit("view"), F.lit("click"), F.lit("buy")), (F.col("id") % 3 + 1).cast("int")
            ),
        )
        .withColumn("amount", (F.col("id") % 1000) / 10.0)
        .select("id", "event_ts", "day", "user_id", "kind", "amount")
    )


def append_rows(spark, table: str, rows: int) -> None:  # type: ignore[no-untyped-def]
    """``rows`` new events of today, in one append commit (new ids after the table's largest): what a
    stream's next micro-batch adds, and what an incremental refresh reads."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect import functions as F
    else:
        from pyspark.sql import functions as F

    start = spark.sql(f"SELECT coalesce(max(id), 0) + 1 AS s FROM {table}").first().s
    df = _events(spark.range(start, start + rows, numPartitions=1), F.current_date(), F)
    catalog, namespace, name = table.split(".")
    df.writeTo(f"`{catalog}`.`{namespace}`.`{name}`").append()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--warehouse", required=True)
    p.add_argument("--table", default="demo.db.events")
    p.add_argument("--files", type=int, default=520)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--remote", help="write through this Spark Connect server (sc://host:port) instead")
    p.add_argument("--delete-every", type=int, default=0, help="also delete rows (position deletes)")
    p.add_argument(
        "--delete-commits",
        type=int,
        default=DELETE_COMMITS,
        help="DELETE commits; each deletes one row in every --delete-every",
    )
    p.add_argument("--append", type=int, default=0, metavar="ROWS", help="append ROWS rows of today instead")
    p.add_argument(
        "--delete-existing",
        type=int,
        default=0,
        metavar="EVERY",
        help="instead: one DELETE commit on the existing table of one row in every EVERY (its write.delete.mode: "
        "merge-on-read in the demo, a position delete file per partition)",
    )
    args = p.parse_args()
    t0 = time.monotonic()
    spark = spark_session(args.warehouse, args.table.split(".")[0], args.remote)
    if args.delete_existing:
        before = spark.sql(f"SELECT count(*) FROM {args.table}").first()[0]
        add_position_deletes(spark, args.table, args.delete_existing, 1)
        r = spark.sql(f"SELECT count(*) FROM {args.table}").first()[0]
        d = spark.sql(f"SELECT count(*) FROM {args.table}.delete_files").first()[0]
        print(f"deleted {before - r} rows of {args.table} ({d} delete files): {r} live records")
        spark.stop()
        return 0
    if args.append:
        append_rows(spark, args.table, args.append)
        r = spark.sql(f"SELECT count(*) FROM {args.table}").first()[0]
        print(
            f"appended {args.append} rows of today to {args.table}: {r} live records in {time.monotonic() - t0:.1f}s"
        )
        spark.stop()
        return 0
    create_table(spark, args.table, args.files, args.rows)
    if args.delete_every:
        add_position_deletes(spark, args.table, args.delete_every, args.delete_commits)
    n = spark.sql(f"SELECT count(*) AS n, sum(file_size_in_bytes) AS b FROM {args.table}.data_files").first()
    d = spark.sql(f"SELECT count(*) FROM {args.table}.delete_files").first()[0]
    r = spark.sql(f"SELECT count(*) FROM {args.table}").first()[0]
    print(
        f"created {args.table}: {n.n} data files, {d} delete files, {n.b} bytes, {r} live records "
        f"in {time.monotonic() - t0:.1f}s"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
