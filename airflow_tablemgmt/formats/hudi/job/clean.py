"""Hudi ``run_clean``: delete the file slices the retention policy no longer needs (commits, hours or file
versions retained; the hours have a 1-hour floor in the settings model). ``run_clean`` is the one Hudi
1.0.x procedure without a ``path`` argument: the table is registered in the session catalog for it (once)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.formats.hudi.actions import HudiCleanSettings
from airflow_tablemgmt.formats.hudi.job.table import (
    metadata_as_on_table,
    register,
    timeline_figures,
)
from airflow_tablemgmt.spark.job import literals
from airflow_tablemgmt.spark.job.maintainers.paths import take_location
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def clean_sql(name: str, s: HudiCleanSettings) -> str:
    """``run_clean`` on the session-catalog table ``name`` (it takes no path)."""
    return (
        f"CALL run_clean(table => {literals.string(name)}, clean_policy => {literals.string(s.policy)}, "
        f"retain_commits => {literals.integer(s.retain_commits)}, "
        f"hours_retained => {literals.integer(int(s.retain_hours.total_seconds() // 3600))}, "
        f"file_versions_retained => {literals.integer(s.retain_file_versions)})"
    )


def clean(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    location = take_location(options, "clean")
    s = parse_settings(HudiCleanSettings, options, "clean")
    for note in s.below_floor():
        log.warning("clean on %s: %s (allow-below-floor is set)", location, note)
    with timed("metrics_before"):
        before = timeline_figures(location)
    sql = clean_sql(register(spark, table, location), s)
    log.info("%s", sql)
    with timed("procedure"), metadata_as_on_table(spark, location):
        rows = [r.asDict() for r in spark.sql(sql).collect()]
    with timed("metrics_after"):
        after = timeline_figures(location)
    out = rows[0] if rows else {}
    return {
        "location": location,
        "policy": s.policy,
        "deleted_files": int(out.get("total_files_deleted") or 0),
        "earliest_commit_to_retain": out.get("earliest_commit_to_retain"),
        "clean_instant": out.get("start_clean_time"),
        "below_floor": bool(s.below_floor()),
        "before": before,
        "after": after,
    }


clean.may_create_table = True  # type: ignore[attr-defined]  # reads its own table (see delta/optimize.py)
