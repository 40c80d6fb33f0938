"""Table shape from Iceberg metadata: the before/after numbers of every summary.

The figures come from the table's metadata, read with pyiceberg at the metadata file the job's own
Iceberg catalog has just loaded (so both see the same table version): the snapshot list, the current
snapshot's manifest list and its manifests' live entries. No Spark job runs, except to count live
records when the snapshot has delete files (only a scan that applies them gives that number). When
pyiceberg cannot read the metadata (a file system only Spark's Hadoop settings can reach, say), the
same figures come from Spark's metadata tables, as a fallback.

The job hands the metrics before the action what it read of the table first (``early=``): its read
before the session existed (``spark/job/early_read.py``, a hadoop table), used as long as the table's
current metadata file is still the one it read (a commit since then is read again), or the metadata
file its table load found. The metrics after the action always load the table again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.metadata.files import TableShape, read_shape
from airflow_tablemgmt.spark.conf import catalog_settings, io_settings
from airflow_tablemgmt.spark.connect.policy import is_remote
from airflow_tablemgmt.spark.job.after_later import leave_to_caller
from airflow_tablemgmt.spark.job.early_read import EarlyRead
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

METRIC_KEYS = (
    "data_files",
    "data_bytes",
    "live_records",
    "physical_rows",
    "delete_files",
    "position_delete_files",
    "equality_delete_files",
    "deletion_vectors",
    "manifests",
    "snapshots",
    "current_snapshot_id",
    "files_per_partition_max",
)


def metadata_table(table: TableIdentifier, name: str) -> str:
    """`cat`.`ns`.`t`.`<name>` for a metadata table such as ``partitions`` or ``snapshots``."""
    return f"{table.quoted}.{quote(name)}"


def metrics_before(
    spark: SparkSession, table: TableIdentifier, *, early: FirstRead | None = None
) -> dict[str, Any]:
    """:func:`table_metrics` before the action, timed as the run's ``metrics_before``.

    ``early`` is what the job already read of ``table`` before the maintainer ran (its read without
    Spark, or its table load): the figures then come from that metadata file, as long as it is still
    the table's current one. Without it the table is loaded now."""
    with timed("metrics_before"):
        _AFTER_FROM_FILES[:] = [(spark, early)] if isinstance(early, EarlyRead) and is_remote(spark) else []
        return table_metrics(spark, table, early=early)


def metrics_after(
    spark: SparkSession, table: TableIdentifier, before: dict[str, Any], *, rows_unchanged: bool = False
) -> dict[str, Any]:
    """:func:`table_metrics` after the action, timed as ``metrics_after``; reuses ``before``'s live
    record count when the action committed no new snapshot (the rows cannot have changed).

    ``rows_unchanged``: the action rewrites files and changes no row, and the caller does not read the
    figures returned. On a session whose caller reads them after the job (a planned batch's kept Connect
    session: ``after_later.py``) the result is then a placeholder the caller fills."""
    with timed("metrics_after"):
        early = next((e for s, e in _AFTER_FROM_FILES if s is spark and e.table == table), None)
        if rows_unchanged and early is not None:
            placeholder = leave_to_caller(spark, table, before, early)
            if placeholder is not None:
                return placeholder
        return table_metrics(spark, table, previous=before, early=early)


#: On Spark Connect, the job's early read that its session agreed with (``metrics_before`` keeps it for
#: this session): the figures after the action come from the table's files as the figures before did,
#: without the metadata log query and the settings read on the server (1-2 s of a small table's task).
_AFTER_FROM_FILES: list[tuple[Any, EarlyRead]] = []


def table_metrics(
    spark: SparkSession,
    table: TableIdentifier,
    *,
    previous: dict[str, Any] | None = None,
    early: FirstRead | None = None,
) -> dict[str, Any]:
    """Files, bytes, rows, delete files, manifests and snapshots of the current table state.

    Two row counts, because they differ whenever delete files exist and only one is what users
    mean by "rows": ``live_records`` is what ``SELECT count(*)`` returns (deletes applied) and
    ``physical_rows`` is the sum of the data files' ``record_count`` (rows as written, deleted
    ones included). A compaction that applies deletes lowers ``physical_rows`` and leaves
    ``live_records`` alone; only expire-data may change ``live_records``. Without delete files the
    two are the same number; with them, ``live_records`` is counted at the snapshot read (``VERSION
    AS OF``), or taken from ``previous`` when that was measured at the same snapshot.

    ``files_per_partition_max`` is the most data files any one partition has (partitions of
    different specs that coerce to the same values count as one, as in Iceberg's ``partitions``
    metadata table). Keys are ``METRIC_KEYS``, the same for every action. ``early``: see
    :func:`metrics_before`.
    """
    try:
        shape = _shape_from_metadata(spark, table, early)
    except Exception as e:  # noqa: BLE001 - the metadata tables give the same figures, dearer
        log.info("metrics of %s from Spark's metadata tables (pyiceberg could not read them: %s)", table, e)
        return _metrics_from_metadata_tables(spark, table)
    if shape.delete_files == 0:
        live = shape.physical_rows
    elif previous is not None and previous.get("current_snapshot_id") == shape.current_snapshot_id:
        live = int(previous["live_records"])
    else:
        live = _live_records(spark, table, shape.current_snapshot_id)
    return shape.metrics(live)


def _shape_from_metadata(spark: SparkSession, table: TableIdentifier, early: FirstRead | None) -> TableShape:
    if early is None or early.table != table:
        location = _load_metadata_location(spark, table)
    elif isinstance(early, Loaded):
        location = early.location if early.location is not None else _load_metadata_location(spark, table)
    else:
        now = early.current_location()
        if now == early.location:
            return early.shape
        # Committed to since the job read it (by the action, or before it: the figures before are then
        # the table the action finds).
        log.info(
            "%s changed since the job read it (%s, now %s): reading it again", table, early.location, now
        )
        if now is not None:  # the session's catalog has the read's settings (``agrees_with``)
            return read_shape(now, io_settings(early.settings, table.catalog))
        location = _load_metadata_location(spark, table)
    return read_shape(location, io_properties(spark, table.catalog))


@dataclass(frozen=True)
class Loaded:
    """What the job's table load found: the metadata file its session's Iceberg catalog loaded (None
    when Spark's catalog answered instead), and the table's location from the same load. The metrics
    before the action read that file instead of loading the table a second time."""

    table: TableIdentifier
    location: str | None
    table_location: str | None = None


def load_table(spark: SparkSession, table: TableIdentifier) -> Loaded | None:
    """Load ``table`` through the session's Iceberg catalog, as the job's ``table_load``: None when it
    does not exist. The job hands what it found to the metrics before the action (one catalog load
    where there were two). Where Iceberg's own load fails for another reason, Spark's catalog answers."""
    try:
        if is_remote(spark):
            return Loaded(table, _load_metadata_location(spark, table))
        iceberg_table = _iceberg_table(spark, table)
        metadata = str(iceberg_table.operations().current().metadataFileLocation())
        return Loaded(table, metadata, str(iceberg_table.location()))
    except Exception as e:  # noqa: BLE001 - py4j wraps Java's exceptions
        if "NoSuchTableException" in f"{type(e).__name__}: {e}":
            return None
        log.info("loading %s through Iceberg failed (%s); asking Spark's catalog", table, str(e)[:200])
        return Loaded(table, None) if spark.catalog.tableExists(str(table)) else None


def table_location(spark: SparkSession, table: TableIdentifier, early: FirstRead | None = None) -> str:
    """The table's location as its metadata records it (where delete-orphans lists files).

    From what the job read of the table first when that has it (the metadata file the early read found,
    or the job's table load), else from one load through the session's Iceberg catalog. Only on Spark
    Connect without either does it take ``DESCRIBE TABLE EXTENDED``, a planned SQL command that cost a
    delete-orphans job 4-23 s under load for this one string. A table's location does not move between
    the job's first read and its action: a hadoop table's never does (Iceberg's HadoopCatalog refuses a
    custom location), and the other catalogs' tables are loaded right before the maintainer."""
    if early is not None and early.table == table:
        known = early.shape.location if isinstance(early, EarlyRead) else early.table_location
        if known:
            return known
    if not is_remote(spark):
        return str(_iceberg_table(spark, table).location())
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table.quoted}").collect():
        if str(row[0]).strip() == "Location":
            return str(row[1]).strip()
    return ""


#: What the job read of its table before the maintainer ran, handed to :func:`metrics_before`.
FirstRead = EarlyRead | Loaded


def _load_metadata_location(spark: SparkSession, table: TableIdentifier) -> str:
    if is_remote(spark):  # Spark Connect: no py4j; the metadata log's newest entry is the current file
        rows = spark.sql(
            f"SELECT file FROM {metadata_table(table, 'metadata_log_entries')} "
            "ORDER BY timestamp DESC, latest_sequence_number DESC LIMIT 1"
        ).collect()
        if not rows:
            raise RuntimeError(f"{table} has no metadata log entry")
        return str(rows[0]["file"])
    return str(_iceberg_table(spark, table).operations().current().metadataFileLocation())


def _iceberg_table(spark: SparkSession, table: TableIdentifier) -> Any:
    """The Iceberg ``Table`` the session's catalog loads for ``table`` (a py4j object; classic sessions)."""
    jvm = spark._jvm  # noqa: SLF001 - Iceberg's table API has no Python binding in Spark
    if jvm is None:
        raise RuntimeError("the session has no JVM gateway")
    return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession,  # noqa: SLF001
        table.quoted,
    )


def io_properties(spark: SparkSession, catalog: str) -> dict[str, str]:
    """The catalog's Iceberg properties as the session has them (``spark.sql.catalog.<name>.*``),
    minus Spark's own settings: what pyiceberg's FileIO needs (``s3.endpoint`` ...)."""
    if is_remote(spark):  # Spark Connect: the session's own settings (``SET`` redacts secrets: ask for them)
        pairs = [(str(r[0]), str(r[1])) for r in spark.sql("SET").collect()]
        settings = catalog_settings(pairs, catalog)
        for key, value in settings.items():
            if "redacted" in value:
                settings[key] = str(spark.conf.get(key))
        return io_settings(settings, catalog)
    return io_settings(catalog_settings(spark.sparkContext.getConf().getAll(), catalog), catalog)


def _live_records(spark: SparkSession, table: TableIdentifier, snapshot_id: int | None) -> int:
    at = f" VERSION AS OF {int(snapshot_id)}" if snapshot_id is not None else ""
    return int(spark.sql(f"SELECT count(*) AS n FROM {table.quoted}{at}").collect()[0]["n"])


def _metrics_from_metadata_tables(spark: SparkSession, table: TableIdentifier) -> dict[str, Any]:
    """The same figures from the ``partitions`` metadata table plus scalar subqueries for manifests,
    snapshots and the ``main`` ref (several Spark jobs, and a scan for ``live_records``)."""
    row = spark.sql(
        "SELECT "
        f"(SELECT count(*) FROM {metadata_table(table, 'manifests')}) AS manifests, "
        f"(SELECT count(*) FROM {metadata_table(table, 'snapshots')}) AS snapshots, "
        f"(SELECT first(snapshot_id) FROM {metadata_table(table, 'refs')} WHERE name = 'main') AS current, "
        # v3 deletion vectors: position deletes in Puffin files (the partitions table counts them as such)
        f"(SELECT count(*) FROM {metadata_table(table, 'delete_files')} WHERE file_format = 'PUFFIN') AS dvs, "
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
        "position_delete_files": int(row["position_delete_files"]) - int(row["dvs"]),
        "equality_delete_files": int(row["equality_delete_files"]),
        "deletion_vectors": int(row["dvs"]),
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
