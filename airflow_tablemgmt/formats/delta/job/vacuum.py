"""Delta ``VACUUM``: delete the files no version within the retention references.

Delta's retention check (``spark.databricks.delta.retentionDurationCheck.enabled``) is never turned
off: a ``retain`` below the table's ``delta.deletedFileRetentionDuration`` fails the run with Delta's
own message. Every run lists first (``VACUUM ... DRY RUN``): a dry run (asked for, or forced by the
factory's first-run policy through the ``dry-run-reason`` option) stops there and reports what would be
deleted; a real run then vacuums and reports the files it was asked to delete.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.formats.delta.actions import VACUUM_DRY_RUN_REASON_OPTION, VacuumSettings
from airflow_tablemgmt.formats.delta.job.table import (
    delta_metrics,
    delta_name,
    use_local_parallelism,
)
from airflow_tablemgmt.spark.job.maintainers.paths import take_location
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


def retain_hours(s: VacuumSettings) -> int:
    """``retain`` in whole hours, rounded up: Delta rounds a fractional ``RETAIN`` to the nearest hour
    (30 minutes would pass its check as 1 hour); rounding up keeps at least what was asked for."""
    assert s.retain is not None
    return math.ceil(s.retain.total_seconds() / 3600)


def vacuum_sql(location: str, s: VacuumSettings, *, dry_run: bool) -> str:
    sql = f"VACUUM {delta_name(location)}"
    if s.retain is not None:
        sql += f" RETAIN {retain_hours(s)} HOURS"
    return sql + (" DRY RUN" if dry_run else "")


def vacuum(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    location = take_location(options, "vacuum")
    reason = options.pop(VACUUM_DRY_RUN_REASON_OPTION, None)
    s = parse_settings(VacuumSettings, options, "vacuum")
    dry_run = s.dry_run or reason is not None
    if (spark.conf.get(RETENTION_CHECK, "true") or "true").lower() == "false":
        # A session (spark-defaults.conf, the connection) turned Delta's safety check off: turn it back on
        # for this job, whose retention rules rely on it.
        log.warning("vacuum: %s=false in the session; set back to true for this job", RETENTION_CHECK)
        spark.conf.set(RETENTION_CHECK, "true")
    for note in s.below_floor():
        log.warning("vacuum on %s: %s (allow-below-floor is set)", location, note)
    use_local_parallelism(spark)
    with timed("metrics_before"):
        before = delta_metrics(spark, location)
    listing = vacuum_sql(location, s, dry_run=True)
    log.info("%s", listing)
    with timed("procedure"):
        candidates = [str(r[0]) for r in spark.sql(listing).collect()]
        if not dry_run:
            sql = vacuum_sql(location, s, dry_run=False)
            log.info("%s", sql)
            spark.sql(sql).collect()
    with timed("metrics_after"):
        after = delta_metrics(spark, location)
    key = "would_delete_files" if dry_run else "deleted_files"
    log.info("vacuum %s: %s %d files%s", location, key, len(candidates), f" ({reason})" if reason else "")
    return {
        "location": location,
        "retain_hours": None if s.retain is None else retain_hours(s),
        "dry_run": dry_run,
        "dry_run_reason": reason if reason else ("dry-run: true is set" if s.dry_run else None),
        "below_floor": bool(s.below_floor()),
        key: len(candidates),
        "sample": sorted(candidates)[: s.sample_size],
        "before": before,
        "after": after,
    }


vacuum.may_create_table = True  # type: ignore[attr-defined]  # reads its own table: see optimize.py
