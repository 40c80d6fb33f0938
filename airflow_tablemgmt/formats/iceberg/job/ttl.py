"""Row TTL (Amoro's data expiration): ``DELETE FROM t WHERE <column> < now - retention``.

When every file either lies wholly before the cutoff or wholly after it (partitions or file
statistics align with the predicate), Iceberg drops whole data files in a metadata-only delete;
otherwise it rewrites files (copy-on-write) or writes delete files (merge-on-read). The summary
reports which happened.

A dry run (``dry-run: true``, or forced by the factory's first-run policy, which passes its
reason as the ``dry-run-reason`` option) runs the same predicate as a query and reports what the
delete would do, per data file: files whose live rows all match would be dropped, files with
some matching rows would be rewritten (or get delete files, on a merge-on-read table). It commits
nothing.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.formats.iceberg.actions import DRY_RUN_REASON_OPTION, ExpireDataSettings
from airflow_tablemgmt.spark.errors import UnsupportedColumnType
from airflow_tablemgmt.spark.job import literals
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.job.metrics import (
    FirstRead,
    metadata_table,
    metrics_after,
    metrics_before,
    snapshot_summary,
)
from airflow_tablemgmt.spark.job.schema import resolve_columns
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType

log = logging.getLogger(__name__)

ALLOWED_TYPES = ("timestamp", "timestamp_ntz", "date")

# DRY_RUN_REASON_OPTION is set only by the iceberg factory (the settings model forbids it in
# declarations): why this run was turned into a dry run. Taken out before validating the options.
EXPLICIT_DRY_RUN = "dry-run: true is set"


def cutoff_literal(data_type: DataType, cutoff: datetime) -> str | None:
    """The cutoff as a literal of the column's type, or None if the type is not a time type."""
    name = data_type.typeName()
    if name == "timestamp":
        return literals.timestamp(cutoff)
    if name == "timestamp_ntz":
        return literals.timestamp_ntz(cutoff)
    if name == "date":
        return literals.date_literal(cutoff.astimezone(UTC).date())
    return None


def _int(summary: dict[str, str], key: str) -> int:
    return int(summary.get(key) or 0)


def _delete_mode(spark: SparkSession, table: TableIdentifier) -> str:
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {table.quoted}").collect()}
    return str(props.get("write.delete.mode", "copy-on-write"))


def would_delete(spark: SparkSession, table: TableIdentifier, predicate: str) -> dict[str, Any]:
    """What ``DELETE ... WHERE predicate`` would remove, read from the data without committing.

    Per data file (``_file``): the live rows and how many match. A file whose live rows all match
    is dropped whole; one with some matching rows is rewritten (copy-on-write) or gets a delete
    file (merge-on-read). Bytes are the data files' sizes; partitions are the distinct partition
    tuples of the files touched (an unpartitioned table has one).
    """
    files = metadata_table(table, "data_files")
    partitioned = "partition" in spark.table(files).columns
    partitions = "count(DISTINCT f.`partition`)" if partitioned else "IF(count(*) > 0, 1, 0)"
    row = spark.sql(
        "WITH per_file AS ("
        f"SELECT _file AS path, count(*) AS live, count_if({predicate}) AS matching "
        f"FROM {table.quoted} GROUP BY _file) "
        "SELECT coalesce(sum(p.matching), 0) AS rows, "
        "count_if(p.matching = p.live) AS drop_files, "
        "coalesce(sum(IF(p.matching = p.live, f.file_size_in_bytes, 0)), 0) AS drop_bytes, "
        "count_if(p.matching < p.live) AS rewrite_files, "
        "coalesce(sum(IF(p.matching < p.live, f.file_size_in_bytes, 0)), 0) AS rewrite_bytes, "
        f"{partitions} AS partitions "
        f"FROM per_file p JOIN {files} f ON f.file_path = p.path WHERE p.matching > 0"
    ).collect()[0]
    return {
        "would_delete_rows": int(row["rows"]),
        "would_drop_data_files": int(row["drop_files"]),
        "would_drop_bytes": int(row["drop_bytes"]),
        "would_rewrite_data_files": int(row["rewrite_files"]),
        "would_rewrite_bytes": int(row["rewrite_bytes"]),
        "would_touch_partitions": int(row["partitions"]),
        "delete_mode": _delete_mode(spark, table),
    }


def expire_data(
    spark: SparkSession,
    table: TableIdentifier,
    options: dict[str, Any],
    *,
    early: FirstRead | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Delete (or, on a dry run, count) rows whose ``column`` is older than ``retention``.

    ``now`` is the instant the cutoff is measured from (default: the current time); tests pass a
    fixed one so their outcome does not depend on the wall clock.
    """
    options = dict(options)
    forced_reason = options.pop(DRY_RUN_REASON_OPTION, None)
    s = parse_settings(ExpireDataSettings, options, "expire-data")
    (field,) = resolve_columns(spark, table, [s.column], "expire-data.column")
    cutoff = (now or datetime.now(UTC)) - s.retention
    literal = cutoff_literal(field.dataType, cutoff)
    if literal is None:
        raise UnsupportedColumnType(
            f"expire-data.column: column {field.name!r} of table {table} has type "
            f"{field.dataType.simpleString()}; allowed: {', '.join(ALLOWED_TYPES)}"
        )
    predicate = f"{quote(field.name)} < {literal}"
    dry_run = s.dry_run or forced_reason is not None
    below_floor = s.below_floor()
    if below_floor and not dry_run:  # allowed only by allow-below-floor: say so where it acts
        log.warning(
            "expire-data on %s: %s (allow-below-floor is set): rows younger than a day are deleted",
            table,
            "; ".join(below_floor),
        )
    before = metrics_before(spark, table, early=early)
    head: dict[str, Any] = {
        "column": field.name,
        "cutoff": cutoff.isoformat(),
        "dry_run": dry_run,
        "below_floor": bool(below_floor),
    }

    if dry_run:
        reason = str(forced_reason) if forced_reason is not None else EXPLICIT_DRY_RUN
        log.info("dry run on %s (%s): counting rows with %s", table, reason, predicate)
        with timed("procedure"):
            report = would_delete(spark, table, predicate)
        after = metrics_after(spark, table, before)
        log.info(
            "dry run on %s: would delete %d rows; drop %d data files (%d bytes), rewrite %d (%d bytes), "
            "in %d partitions; nothing was deleted",
            table,
            report["would_delete_rows"],
            report["would_drop_data_files"],
            report["would_drop_bytes"],
            report["would_rewrite_data_files"],
            report["would_rewrite_bytes"],
            report["would_touch_partitions"],
        )
        return {
            **head,
            "dry_run_reason": reason,
            **report,
            "snapshot_id": None,
            "before": before,
            "after": after,
        }

    sql = f"DELETE FROM {table.quoted} WHERE {predicate}"
    log.info("deleting rows of %s older than %s: %s", table, cutoff.isoformat(), sql)
    with timed("procedure"):
        spark.sql(sql)
    after = metrics_after(spark, table, before)

    committed = after["current_snapshot_id"] != before["current_snapshot_id"]
    snap = snapshot_summary(spark, table, after["current_snapshot_id"]) if committed else {}
    deleted_data_files = _int(snap, "deleted-data-files")
    added_data_files = _int(snap, "added-data-files")
    added_delete_files = _int(snap, "added-delete-files")
    deleted_rows = before["live_records"] - after["live_records"]
    log.info("deleted %d rows of %s (%d data files dropped)", deleted_rows, table, deleted_data_files)
    return {
        **head,
        "deleted_rows": deleted_rows,
        "snapshot_id": after["current_snapshot_id"] if committed else None,
        "operation": snap.get("operation"),
        "deleted_data_files": deleted_data_files,
        "added_data_files": added_data_files,
        "added_delete_files": added_delete_files,
        # Whole files dropped, nothing rewritten and no delete files: the metadata-only path.
        "partition_aligned": committed and added_data_files == 0 and added_delete_files == 0,
        "before": before,
        "after": after,
    }
