"""Table shape from Iceberg's metadata tables: the before/after numbers of every summary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# ``content`` of a row in the ``files`` metadata table.
DATA, POSITION_DELETES, EQUALITY_DELETES = 0, 1, 2


def metadata_table(table: TableIdentifier, name: str) -> str:
    """`cat`.`ns`.`t`.`<name>` for a metadata table such as ``files`` or ``snapshots``."""
    return f"{table.quoted}.{quote(name)}"


def table_metrics(spark: SparkSession, table: TableIdentifier) -> dict[str, Any]:
    """Files, bytes, records, delete files, manifests and snapshots of the current table state.

    ``records`` counts rows in data files as written (before deletes are applied);
    ``files_per_partition_max`` is the most data files any one partition has.
    """
    files = spark.sql(
        "SELECT content, count(*) AS n, coalesce(sum(file_size_in_bytes), 0) AS bytes, "
        f"coalesce(sum(record_count), 0) AS records FROM {metadata_table(table, 'files')} GROUP BY content"
    ).collect()
    by_content = {int(r["content"]): r for r in files}
    data = by_content.get(DATA)
    pos = by_content.get(POSITION_DELETES)
    eq = by_content.get(EQUALITY_DELETES)

    data_files = metadata_table(table, "data_files")
    partitioned = "partition" in spark.table(data_files).columns
    group = "GROUP BY `partition`" if partitioned else ""
    per_partition = spark.sql(f"SELECT max(n) AS m FROM (SELECT count(*) AS n FROM {data_files} {group})")
    files_per_partition_max = per_partition.collect()[0]["m"] or 0

    manifests = spark.sql(f"SELECT count(*) AS n FROM {metadata_table(table, 'manifests')}").collect()[0]["n"]
    snapshots = spark.sql(f"SELECT count(*) AS n FROM {metadata_table(table, 'snapshots')}").collect()[0]["n"]
    refs = spark.sql(f"SELECT snapshot_id FROM {metadata_table(table, 'refs')} WHERE name = 'main'").collect()
    return {
        "data_files": int(data["n"]) if data else 0,
        "data_bytes": int(data["bytes"]) if data else 0,
        "records": int(data["records"]) if data else 0,
        "delete_files": (int(pos["n"]) if pos else 0) + (int(eq["n"]) if eq else 0),
        "position_delete_files": int(pos["n"]) if pos else 0,
        "equality_delete_files": int(eq["n"]) if eq else 0,
        "delete_bytes": (int(pos["bytes"]) if pos else 0) + (int(eq["bytes"]) if eq else 0),
        "manifests": int(manifests),
        "snapshots": int(snapshots),
        "current_snapshot_id": int(refs[0]["snapshot_id"]) if refs else None,
        "files_per_partition_max": int(files_per_partition_max),
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
