"""Hudi ``archive_commits``: move completed instants off the active timeline once it holds more than
``max-commits``, down to ``min-commits`` (Hudi 1.x writes them to the LSM history under
``.hoodie/timeline/history/``). Hudi itself never archives past the last clean's earliest retained commit
or a pending compaction or clustering; the settings model holds the floor on ``min-commits``. The table is
taken by its path (``path =>``), not a session-catalog name Hudi would resolve by reading it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.formats.hudi.actions import HudiArchiveSettings
from airflow_tablemgmt.formats.hudi.job.table import has_metadata_table, path_arg, timeline_figures
from airflow_tablemgmt.spark.job import literals
from airflow_tablemgmt.spark.job.maintainers.paths import take_location
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def archive_sql(location: str, s: HudiArchiveSettings, *, metadata_table: bool) -> str:
    return (
        f"CALL archive_commits({path_arg(location)}, "
        f"min_commits => {literals.integer(s.min_commits)}, max_commits => {literals.integer(s.max_commits)}, "
        f"retain_commits => {literals.integer(s.retain_commits)}, "
        f"enable_metadata => {'true' if metadata_table else 'false'})"
    )


def archive(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    location = take_location(options, "archive")
    s = parse_settings(HudiArchiveSettings, options, "archive")
    for note in s.below_floor():
        log.warning("archive on %s: %s (allow-below-floor is set)", location, note)
    with timed("metrics_before"):
        before = timeline_figures(location)
        metadata_table = has_metadata_table(spark, location)
    sql = archive_sql(location, s, metadata_table=metadata_table)
    log.info("%s", sql)
    with timed("procedure"):
        rows = spark.sql(sql).collect()
    with timed("metrics_after"):
        after = timeline_figures(location)
    result = int(rows[0][0]) if rows and rows[0][0] is not None else None
    if result not in (0, None):
        raise RuntimeError(f"archive_commits on {location} returned {result} (0 is success)")
    archived = None
    if "completed_instants" in before and "completed_instants" in after:
        archived = before["completed_instants"] - after["completed_instants"]
    return {
        "location": location,
        "min_commits": s.min_commits,
        "max_commits": s.max_commits,
        "retain_commits": s.retain_commits,
        "archived_instants": archived,
        # with a metadata table, Hudi archives nothing until that table compacted once (its own gate)
        "metadata_table": metadata_table,
        "below_floor": bool(s.below_floor()),
        "before": before,
        "after": after,
    }


archive.may_create_table = True  # type: ignore[attr-defined]  # reads its own table (see delta/optimize.py)
