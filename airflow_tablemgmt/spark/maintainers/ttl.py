"""Row TTL (Amoro's data expiration): ``DELETE FROM t WHERE <column> < now - retention``.

When every file either lies wholly before the cutoff or wholly after it (partitions or file
statistics align with the predicate), Iceberg drops whole data files in a metadata-only delete;
otherwise it rewrites files (copy-on-write) or writes delete files (merge-on-read). The summary
reports which happened.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.actions import ExpireDataSettings
from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.spark import literals
from airflow_tablemgmt.spark.errors import UnsupportedColumnType
from airflow_tablemgmt.spark.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.metrics import snapshot_summary, table_metrics
from airflow_tablemgmt.spark.schema import resolve_columns

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType

log = logging.getLogger(__name__)

ALLOWED_TYPES = ("timestamp", "timestamp_ntz", "date")


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


def _count(spark: SparkSession, table: TableIdentifier) -> int:
    return int(spark.sql(f"SELECT count(*) AS n FROM {table.quoted}").collect()[0]["n"])


def _int(summary: dict[str, str], key: str) -> int:
    return int(summary.get(key) or 0)


def expire_data(spark: SparkSession, table: TableIdentifier, options: dict[str, Any]) -> dict[str, Any]:
    """Delete rows whose ``column`` is older than ``retention``."""
    s = parse_settings(ExpireDataSettings, options, "expire-data")
    (field,) = resolve_columns(spark, table, [s.column], "expire-data.column")
    cutoff = datetime.now(UTC) - s.retention
    literal = cutoff_literal(field.dataType, cutoff)
    if literal is None:
        raise UnsupportedColumnType(
            f"expire-data.column: column {field.name!r} of table {table} has type "
            f"{field.dataType.simpleString()}; allowed: {', '.join(ALLOWED_TYPES)}"
        )
    before = table_metrics(spark, table)
    records_before = _count(spark, table)
    sql = f"DELETE FROM {table.quoted} WHERE {quote(field.name)} < {literal}"
    log.info("deleting rows of %s older than %s: %s", table, cutoff.isoformat(), sql)
    spark.sql(sql)
    after = table_metrics(spark, table)
    records_after = _count(spark, table)

    committed = after["current_snapshot_id"] != before["current_snapshot_id"]
    snap = snapshot_summary(spark, table, after["current_snapshot_id"]) if committed else {}
    deleted_data_files = _int(snap, "deleted-data-files")
    added_data_files = _int(snap, "added-data-files")
    added_delete_files = _int(snap, "added-delete-files")
    deleted_rows = records_before - records_after
    log.info("deleted %d rows of %s (%d data files dropped)", deleted_rows, table, deleted_data_files)
    return {
        "column": field.name,
        "cutoff": cutoff.isoformat(),
        "records_before": records_before,
        "records_after": records_after,
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
