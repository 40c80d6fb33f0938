"""Statistics: ``compute_table_stats`` writes a Puffin file of NDV sketches and registers it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.formats.iceberg.actions import ComputeStatsSettings
from airflow_tablemgmt.spark.job import literals
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.job.metrics import FirstRead, metrics_after, metrics_before
from airflow_tablemgmt.spark.job.procedures import call_procedure
from airflow_tablemgmt.spark.job.schema import resolve_columns
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def compute_stats(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: FirstRead | None = None
) -> dict[str, Any]:
    """Compute NDV statistics for ``columns`` (all columns when empty) of the current snapshot."""
    s = parse_settings(ComputeStatsSettings, options, "compute-stats")
    args: dict[str, str] = {}
    columns: list[str] = []
    if s.columns:
        columns = [f.name for f in resolve_columns(spark, table, s.columns, "compute-stats.columns")]
        args["columns"] = literals.string_array(columns)
    before = metrics_before(spark, table, early=early)
    log.info("computing statistics of %s (columns: %s)", table, ", ".join(columns) or "all")
    with timed("procedure"):
        rows = call_procedure(spark, table, "compute_table_stats", args)
    after = metrics_after(spark, table, before)
    path = rows[0]["statistics_file"] if rows else None
    log.info("statistics of %s: %s", table, path or "nothing to compute (empty table)")
    return {
        "statistics_file": path,
        "columns": columns or None,
        "snapshot_id": before["current_snapshot_id"],
        "before": before,
        "after": after,
    }
