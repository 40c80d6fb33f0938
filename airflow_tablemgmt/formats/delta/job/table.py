"""A Delta table through Spark: its SQL name and its figures (``DESCRIBE DETAIL``), on any storage."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.formats.delta.metadata import read_delta
from airflow_tablemgmt.metadata.errors import HealthUnavailable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def delta_name(location: str) -> str:
    """``delta.`<location>``` (the location was checked by ``paths.take_location``)."""
    return f"delta.`{location}`"


def delta_metrics(spark: SparkSession, location: str) -> dict[str, Any]:
    """Version, live data files and bytes of the table as committed now: from the ``_delta_log`` without
    Spark where the table is local (``formats/delta/metadata.py``), else ``DESCRIBE DETAIL`` / ``HISTORY``."""
    try:
        state = read_delta(location)
    except HealthUnavailable:
        pass
    else:
        return {
            "current_snapshot_id": state.version,
            "data_files": state.data_files,
            "total_bytes": state.total_bytes,
        }
    detail = spark.sql(f"DESCRIBE DETAIL {delta_name(location)}").collect()[0].asDict()
    version = spark.sql(f"DESCRIBE HISTORY {delta_name(location)} LIMIT 1").collect()[0]["version"]
    return {
        "current_snapshot_id": int(version),
        "data_files": int(detail.get("numFiles") or 0),
        "total_bytes": int(detail.get("sizeInBytes") or 0),
    }


def use_local_parallelism(spark: SparkSession) -> None:
    """On a ``local`` master, list files with the cores there are, not Spark's default 10,000 tasks
    (Delta's VACUUM lists the table with ``parallelPartitionDiscovery.parallelism`` tasks)."""
    if (spark.sparkContext.master or "").startswith("local"):
        spark.conf.set(
            "spark.sql.sources.parallelPartitionDiscovery.parallelism",
            str(max(spark.sparkContext.defaultParallelism, 1)),
        )
