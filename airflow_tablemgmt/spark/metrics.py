"""Table shape from Iceberg metadata: the before/after numbers of every summary.

The figures come from the table's metadata, read with pyiceberg at the metadata file the job's own
Iceberg catalog has just loaded (so both see the same table version): the snapshot list, the current
snapshot's manifest list and its manifests' live entries. No Spark job runs, except to count live
records when the snapshot has delete files (only a scan that applies them gives that number). When
pyiceberg cannot read the metadata (a file system only Spark's Hadoop settings can reach, say), the
same figures come from Spark's metadata tables, as a fallback.

For a hadoop table the job may have read the figures before its session existed
(``spark.early_read``); the metrics before the action then use that read, once, as long as the table's
current metadata file is still the one it read (a commit since then is read again).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.spark.result import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_tablemgmt.spark.early_read import EarlyRead

log = logging.getLogger(__name__)

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

# DataFileContent values of the Iceberg spec (pyiceberg.manifest.DataFileContent).
_DATA, _POSITION_DELETES, _EQUALITY_DELETES = 0, 1, 2


def metadata_table(table: TableIdentifier, name: str) -> str:
    """`cat`.`ns`.`t`.`<name>` for a metadata table such as ``partitions`` or ``snapshots``."""
    return f"{table.quoted}.{quote(name)}"


def metrics_before(spark: SparkSession, table: TableIdentifier) -> dict[str, Any]:
    """:func:`table_metrics` before the action, timed as the run's ``metrics_before``."""
    with timed("metrics_before"):
        return table_metrics(spark, table)


def metrics_after(spark: SparkSession, table: TableIdentifier, before: dict[str, Any]) -> dict[str, Any]:
    """:func:`table_metrics` after the action, timed as ``metrics_after``; reuses ``before``'s live
    record count when the action committed no new snapshot (the rows cannot have changed)."""
    with timed("metrics_after"):
        return table_metrics(spark, table, previous=before)


def table_metrics(
    spark: SparkSession, table: TableIdentifier, *, previous: dict[str, Any] | None = None
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
    metadata table). Keys are ``METRIC_KEYS``, the same for every action.
    """
    try:
        shape = _shape_from_metadata(spark, table)
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


@dataclass
class TableShape:
    """Everything but ``live_records``, read from a metadata file without Spark."""

    current_snapshot_id: int | None = None
    snapshots: int = 0
    manifests: int = 0
    # coerced partition -> [data files, data bytes, physical rows, position delete files, equality ...]
    partitions: dict[tuple[Any, ...], list[int]] = field(default_factory=dict)

    def add(self, partition: tuple[Any, ...], content: int, record_count: int, size: int) -> None:
        counts = self.partitions.setdefault(partition, [0, 0, 0, 0, 0])
        if content == _DATA:
            counts[0] += 1
            counts[1] += size
            counts[2] += record_count
        elif content == _POSITION_DELETES:
            counts[3] += 1
        elif content == _EQUALITY_DELETES:
            counts[4] += 1

    def total(self, i: int) -> int:
        return sum(c[i] for c in self.partitions.values())

    @property
    def physical_rows(self) -> int:
        return self.total(2)

    @property
    def delete_files(self) -> int:
        return self.total(3) + self.total(4)

    def metrics(self, live_records: int) -> dict[str, Any]:
        return {
            "data_files": self.total(0),
            "data_bytes": self.total(1),
            "live_records": live_records,
            "physical_rows": self.physical_rows,
            "delete_files": self.delete_files,
            "position_delete_files": self.total(3),
            "equality_delete_files": self.total(4),
            "manifests": self.manifests,
            "snapshots": self.snapshots,
            "current_snapshot_id": self.current_snapshot_id,
            "files_per_partition_max": max((c[0] for c in self.partitions.values()), default=0),
        }


def _shape_from_metadata(spark: SparkSession, table: TableIdentifier) -> TableShape:
    early = _EARLY.pop(table.quoted, None)
    if early is None:
        location = metadata_location(spark, table)
    else:
        now = early.current_location()
        if now == early.location:
            return early.shape
        # Committed to since the job read it: the figures before are the table the action finds.
        log.info(
            "%s changed since the job read it (%s, now %s): reading it again", table, early.location, now
        )
        location = now if now is not None else _load_metadata_location(spark, table)
    return read_shape(location, io_properties(spark, table.catalog))


def read_shape(location: str, properties: dict[str, str]) -> TableShape:
    """The shape of the table at metadata file ``location``, read with pyiceberg (FileIO ``properties``)."""
    from pyiceberg.table import StaticTable

    with _quiet_pyiceberg():
        static = StaticTable.from_metadata(location, properties)
    metadata = static.metadata
    main = metadata.refs.get("main")
    shape = TableShape(
        current_snapshot_id=main.snapshot_id if main is not None else None,
        snapshots=len(metadata.snapshots),
    )
    snapshot = metadata.snapshot_by_id(main.snapshot_id) if main is not None else None
    if snapshot is None:
        return shape
    manifests = snapshot.manifests(static.io)
    shape.manifests = len(manifests)
    field_ids = {spec.spec_id: [f.field_id for f in spec.fields] for spec in metadata.partition_specs}
    for manifest in manifests:
        for entry in manifest.fetch_manifest_entry(static.io, discard_deleted=True):
            f = entry.data_file
            ids = field_ids.get(f.spec_id, [])
            # Coerced to the union of all specs: a field a spec lacks is null, and nulls drop out.
            key = tuple(
                sorted((fid, f.partition[i]) for i, fid in enumerate(ids) if f.partition[i] is not None)
            )
            shape.add(key, int(f.content), int(f.record_count), int(f.file_size_in_bytes))
    return shape


# The metadata file the job's table load found, per table: the first metrics read uses it instead of
# loading the table a second time. Taken once (the read after the action must load the table again).
_LOADED: dict[str, str] = {}
# The job's read before its session existed, per table: the first metrics read uses its figures.
_EARLY: dict[str, EarlyRead] = {}


def load_table(spark: SparkSession, table: TableIdentifier) -> bool:
    """Load ``table`` through the session's Iceberg catalog, as the job's ``table_load``: False when it
    does not exist. Its metadata file is kept for the metrics before the action (one catalog load where
    there were two). Where Iceberg's own load fails for another reason, Spark's catalog answers."""
    forget_loaded()
    try:
        location = _load_metadata_location(spark, table)
    except Exception as e:  # noqa: BLE001 - py4j wraps Java's exceptions
        if "NoSuchTableException" in f"{type(e).__name__}: {e}":
            return False
        log.info("loading %s through Iceberg failed (%s); asking Spark's catalog", table, str(e)[:200])
        return bool(spark.catalog.tableExists(str(table)))
    _LOADED[table.quoted] = location
    return True


def use_early_read(early: EarlyRead) -> None:
    """Let the first metrics read of ``early.table`` use ``early``, the job's read of it without Spark
    (it stands in for the table load: the job checked its session's catalog agrees with it)."""
    forget_loaded()
    _EARLY[early.table.quoted] = early


def forget_loaded() -> None:
    """Drop what an earlier table load found (a job that does not load its table must not use it)."""
    _LOADED.clear()
    _EARLY.clear()


def metadata_location(spark: SparkSession, table: TableIdentifier) -> str:
    """The metadata file of ``table`` as the session's Iceberg catalog loads it now (or as the job's
    table load found it moments ago, once)."""
    known = _LOADED.pop(table.quoted, None)
    return known if known is not None else _load_metadata_location(spark, table)


def _load_metadata_location(spark: SparkSession, table: TableIdentifier) -> str:
    jvm = spark._jvm  # noqa: SLF001 - Iceberg's table API has no Python binding in Spark
    if jvm is None:
        raise RuntimeError("the session has no JVM gateway")
    iceberg_table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession,  # noqa: SLF001
        table.quoted,
    )
    return str(iceberg_table.operations().current().metadataFileLocation())


def io_properties(spark: SparkSession, catalog: str) -> dict[str, str]:
    """The catalog's Iceberg properties as the session has them (``spark.sql.catalog.<name>.*``),
    minus Spark's own settings: what pyiceberg's FileIO needs (``s3.endpoint`` ...)."""
    return io_settings(catalog_settings(spark.sparkContext.getConf().getAll(), catalog), catalog)


def catalog_settings(pairs: Iterable[tuple[str, str]], catalog: str) -> dict[str, str]:
    """The Spark settings of catalog ``catalog`` among ``pairs``: ``spark.sql.catalog.<name>[.*]``."""
    key = f"spark.sql.catalog.{catalog}"
    return {k: v for k, v in pairs if k == key or k.startswith(f"{key}.")}


def io_settings(settings: dict[str, str], catalog: str) -> dict[str, str]:
    """:func:`catalog_settings` as Iceberg catalog properties (prefix off), minus Spark's own settings."""
    prefix = f"spark.sql.catalog.{catalog}."
    return {
        key[len(prefix) :]: value
        for key, value in settings.items()
        if key.startswith(prefix) and not key[len(prefix) :].startswith("spark.")
    }


@contextmanager
def _quiet_pyiceberg() -> Iterator[None]:
    # pyiceberg warns on every read that it found no catalog config file; the job configures none.
    logger = logging.getLogger("pyiceberg")
    level = logger.level
    logger.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        logger.setLevel(level)


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
