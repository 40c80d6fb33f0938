"""Delta ``OPTIMIZE``: bin-pack small files, or ``ZORDER BY`` columns, optionally in some partitions only."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.formats.delta.actions import OptimizeSettings
from airflow_tablemgmt.formats.delta.job.table import delta_metrics, delta_name
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.spark.job import literals
from airflow_tablemgmt.spark.job.maintainers.paths import take_location
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return literals.boolean(value)
    if isinstance(value, int):
        return literals.integer(value)
    return literals.string(str(value))


def optimize_sql(location: str, s: OptimizeSettings) -> str:
    sql = f"OPTIMIZE {delta_name(location)}"
    if s.partition_filter:
        sql += " WHERE " + " AND ".join(f"{quote(c)} = {_literal(v)}" for c, v in s.partition_filter.items())
    if s.zorder_by:
        sql += f" ZORDER BY ({', '.join(quote(c) for c in s.zorder_by)})"
    return sql


def optimize(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    location = take_location(options, "optimize")
    s = parse_settings(OptimizeSettings, options, "optimize")
    with timed("metrics_before"):
        before = delta_metrics(spark, location)
    sql = optimize_sql(location, s)
    log.info("%s", sql)
    with timed("procedure"):
        rows = spark.sql(sql).collect()
    with timed("metrics_after"):
        after = delta_metrics(spark, location)
    metrics = (rows[0]["metrics"].asDict(recursive=True) if rows and rows[0]["metrics"] else {}) or {}
    added, removed = metrics.get("filesAdded") or {}, metrics.get("filesRemoved") or {}
    out: dict[str, Any] = {
        "location": location,
        "strategy": "zorder" if s.zorder_by else "binpack",
        "zorder_by": s.zorder_by,
        "partition_filter": s.partition_filter,
        "files_added": int(metrics.get("numFilesAdded") or 0),
        "files_removed": int(metrics.get("numFilesRemoved") or 0),
        "bytes_added": int(added.get("totalSize") or 0),
        "bytes_removed": int(removed.get("totalSize") or 0),
        "partitions_optimized": int(metrics.get("partitionsOptimized") or 0),
        "before": before,
        "after": after,
    }
    out.update(as_the_optimize_read_it(location, before, after))
    log.info("optimize %s: %s files -> %s", location, out["before"]["data_files"], after["data_files"])
    return out


def as_the_optimize_read_it(location: str, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The figures of the OPTIMIZE commit itself, read from the log where it is readable without Spark.

    Under a concurrent writer the table moves between the job's first read (``before``) and the version
    OPTIMIZE compacted (its commit's ``readVersion``), and again before ``after`` is read: OPTIMIZE's own
    counts then include files ``before`` never saw (221 files removed beside 133 files before). ``before``
    becomes the table at the ``readVersion``, the counts are the OPTIMIZE commit's own ``add``/``remove``
    actions, and the commits of other writers in between are reported (``concurrent_commits``)."""
    from airflow_tablemgmt.formats.delta.metadata import commit_actions, read_delta

    first, last = before.get("current_snapshot_id"), after.get("current_snapshot_id")
    if not isinstance(first, int) or not isinstance(last, int):
        return {}
    try:
        for version in range(last, first, -1):
            actions = commit_actions(location, version)
            info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
            if info.get("operation") != "OPTIMIZE":
                continue
            read_version = int(info.get("readVersion", version - 1))
            at_read = read_delta(location, version=read_version) if read_version != first else None
            own_removes = [a["remove"] for a in actions if "remove" in a]
            own_adds = [a["add"] for a in actions if "add" in a]
            result: dict[str, Any] = {
                "optimize_version": version,
                "files_removed": len(own_removes),
                "files_added": len(own_adds),
                "concurrent_commits": (last - first) - 1,
            }
            if at_read is not None:
                result["before"] = {
                    **before,
                    "current_snapshot_id": at_read.version,
                    "data_files": at_read.data_files,
                    "total_bytes": at_read.total_bytes,
                }
            return result
    except (HealthUnavailable, OSError, ValueError, KeyError) as e:  # a log not readable here: Delta's counts
        log.info("optimize %s: its commit not read from the log (%s)", location, e)
    return {}


# The job's first read of a table is Iceberg's (spark/job/early_read.py); this maintainer reads its Delta
# table itself, so the job runs it as it runs a maintainer that needs no table loaded first.
optimize.may_create_table = True  # type: ignore[attr-defined]
