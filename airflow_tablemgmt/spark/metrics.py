"""Table shape from Iceberg's metadata tables: the before/after numbers of every summary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


METRIC_KEYS = (
    "data_files",
    "data_bytes",
    "live_records",
    "physical_rows",
    "delete_files",
    "position_delete_files",
    "equality_delete_files",
    "manifests",
    "snapshots",
    "current_snapshot_id",
    "files_per_partition_max",
)


def metadata_table(table: TableIdentifier, name: str) -> str:
    """`cat`.`ns`.`t`.`<name>` for a metadata table such as ``partitions`` or ``snapshots``."""
    return f"{table.quoted}.{quote(name)}"


def table_metrics(spark: SparkSession, table: TableIdentifier) -> dict[str, Any]:
    """Files, bytes, rows, delete files, manifests and snapshots of the current table state.

    Two row counts, because they differ whenever delete files exist and only one is what users
    mean by "rows": ``live_records`` is what ``SELECT count(*)`` returns (deletes applied) and
    ``physical_rows`` is the sum of the data files' ``record_count`` (rows as written, deleted
    ones included). A compaction that applies deletes lowers ``physical_rows`` and leaves
    ``live_records`` alone; only expire-data may change ``live_records``.

    The rest comes from the ``partitions`` metadata table (per-partition file counts, which
    Iceberg keeps in manifests, so no data is read) plus scalar subqueries for manifests,
    snapshots and the ``main`` ref. ``files_per_partition_max`` is the most data files any one
    partition has. Keys are ``METRIC_KEYS``, the same for every action.
    """
    row = spark.sql(
        "SELECT "
        f"(SELECT count(*) FROM {metadata_table(table, 'manifests')}) AS manifests, "
        f"(SELECT count(*) FROM {metadata_table(table, 'snapshots')}) AS snapshots, "
        f"(SELECT first(snapshot_id) FROM {metadata_table(table, 'refs')} WHERE name = 'main') AS current, "
        "coalesce(sum(file_count), 0) AS data_files, "
        "coalesce(sum(total_data_file_size_in_bytes), 0) AS data_bytes, "
        f"(SELECT count(*) FROM {table.quoted}) AS live_records, "
        "coalesce(sum(record_count), 0) AS physical_rows, "
        "coalesce(sum(position_delete_file_count), 0) AS position_delete_files, "
        "coalesce(sum(equality_delete_file_count), 0) AS equality_delete_files, "
        "coalesce(max(file_count), 0) AS files_per_partition_max "
        f"FROM {metadata_table(table, 'partitions')}"
    ).collect()[0]
    return {
        "data_files": int(row["data_files"]),
        "data_bytes": int(row["data_bytes"]),
        "live_records": int(row["live_records"]),
        "physical_rows": int(row["physical_rows"]),
        "delete_files": int(row["position_delete_files"]) + int(row["equality_delete_files"]),
        "position_delete_files": int(row["position_delete_files"]),
        "equality_delete_files": int(row["equality_delete_files"]),
        "manifests": int(row["manifests"]),
        "snapshots": int(row["snapshots"]),
        "current_snapshot_id": int(row["current"]) if row["current"] is not None else None,
        "files_per_partition_max": int(row["files_per_partition_max"]),
    }


def snapshot_summary(spark: SparkSession, table: TableIdentifier, snapshot_id: int) -> dict[str, str]:
    """The ``summary`` map Iceberg recorded for one snapshot (e.g. ``deleted-data-files``)."""
    rows = spark.sql(
        f"SELECT operation, summary FROM {metadata_table(table, 'snapshots')} "
        f"WHERE snapshot_id = {int(snapshot_id)}"
    ).collect()
    if not rows:
        return {}
    summary = dict(rows[0]["summary"] or {})
    summary["operation"] = rows[0]["operation"]
    return summary
