"""The Spark driver's side of the Paimon plugin: its ``MAINTAINERS``, written against the public driver API
(``airflow_tablemgmt.spark.job.plugins``). The job imports this module by the name the format's descriptor
gives (``FormatSession.module``) when it meets a Paimon table.

Each maintainer calls one Paimon procedure on ``<catalog>.<namespace>.<name>`` and reports the table's
figures before and after from Paimon's system tables (``$snapshots``, ``$files``). ``compact``'s commit
names the process attempt (``commit_user_prefix()`` as Paimon's ``commit.user-prefix``), so a retry on
another host reads from the snapshot that it committed (``factory.commit_marks``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.spark.job.plugins import (
    TableIdentifier,
    commit_user_prefix,
    parse_duration,
    timed,
)
from tablemgmt_paimon.procedures import (
    compact_sql,
    expire_partitions_sql,
    expire_snapshots_sql,
    remove_orphans_sql,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_SHARED = ("enabled", "interval", "on-new-snapshot", "parallelism", "trigger", "fallback-interval")


def _name(table: TableIdentifier) -> str:
    return f"`{table.catalog}`.`{table.namespace}`.`{table.name}`"


def figures(spark: SparkSession, table: TableIdentifier) -> dict[str, Any]:
    """Snapshots and the current snapshot's data files, from Paimon's system tables."""
    base = _name(table)
    snapshots = spark.sql(
        f"SELECT count(*) AS n, max(snapshot_id) AS latest FROM {base[:-1]}$snapshots`"
    ).first()
    files = spark.sql(
        f"SELECT count(*) AS n, coalesce(sum(file_size_in_bytes), 0) AS bytes, coalesce(sum(record_count), 0) "
        f"AS records FROM {base[:-1]}$files`"
    ).first()
    return {
        "snapshots": int(snapshots["n"]),
        "latest_snapshot": snapshots["latest"],
        "data_files": int(files["n"]),
        "data_bytes": int(files["bytes"]),
        "records_in_files": int(files["records"]),
    }


def _run(spark: SparkSession, table: TableIdentifier, sql: str, action: str, **extra: Any) -> dict[str, Any]:
    with timed("metrics_before"):
        before = figures(spark, table)
    log.info("%s", sql)
    with timed("procedure"):
        rows = [r.asDict(recursive=True) for r in spark.sql(sql).collect()]
    with timed("metrics_after"):
        after = figures(spark, table)
    log.info("%s %s: %s -> %s", action, table, before, after)
    return {"action": action, "sql": sql, "result": rows[:50], "before": before, "after": after, **extra}


def _table_arg(table: TableIdentifier) -> str:
    return f"{table.namespace}.{table.name}"


def compact(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    sql = compact_sql(table.catalog, _table_arg(table), options, commit_user_prefix())
    return _run(spark, table, sql, "compact", order_strategy=options.get("order-strategy", "none"))


def expire_snapshots(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    older_than = parse_duration(options.get("older-than", "1d"))
    sql = expire_snapshots_sql(table.catalog, _table_arg(table), options, older_than)
    summary = _run(spark, table, sql, "expire-snapshots")
    summary["expired_snapshots"] = summary["before"]["snapshots"] - summary["after"]["snapshots"]
    return summary


def expire_partitions(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    expiration = parse_duration(options["expiration-time"])
    sql = expire_partitions_sql(table.catalog, _table_arg(table), options, expiration)
    summary = _run(spark, table, sql, "expire-partitions")
    summary["expired_partitions"] = [r.get("expired_partitions") for r in summary["result"]]
    return summary


def remove_orphans(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    older_than = parse_duration(options.get("older-than", "3d"))
    dry_run = bool(options.get("dry-run"))
    sql = remove_orphans_sql(table.catalog, _table_arg(table), older_than, dry_run)
    summary = _run(spark, table, sql, "remove-orphans", dry_run=dry_run)
    if options.get("dry-run-reason"):
        summary["dry_run_reason"] = options["dry-run-reason"]
    return summary


MAINTAINERS = {
    "compact": compact,
    "expire-snapshots": expire_snapshots,
    "expire-partitions": expire_partitions,
    "remove-orphans": remove_orphans,
}
