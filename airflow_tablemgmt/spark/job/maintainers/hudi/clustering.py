"""Hudi ``run_clustering``: rewrite the table's file groups sorted by columns, linearly or along a z-order
or Hilbert curve (Hudi schedules the clustering instant and executes it in one call)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.format_actions import HudiClusteringSettings
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.spark.job import literals
from airflow_tablemgmt.spark.job.maintainers.hudi.table import register, timeline_figures
from airflow_tablemgmt.spark.job.maintainers.paths import take_location
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def clustering(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    location = take_location(options, "clustering")
    s = parse_settings(HudiClusteringSettings, options, "clustering")
    name = register(spark, table, location)
    with timed("metrics_before"):
        before = timeline_figures(location)
    sql = (
        f"CALL run_clustering(table => {literals.string(name)}, order => {literals.string(','.join(s.sort_columns))}, "
        f"order_strategy => {literals.string(s.layout.value)})"
    )
    log.info("%s", sql)
    with timed("procedure"):
        rows = [r.asDict() for r in spark.sql(sql).collect()]
    with timed("metrics_after"):
        after = timeline_figures(location)
    return {
        "location": location,
        "sort_columns": s.sort_columns,
        "layout": s.layout.value,
        "instants": [str(r.get("timestamp")) for r in rows],
        "file_groups_rewritten": sum(int(r.get("input_group_size") or 0) for r in rows),
        "states": sorted({str(r.get("state")) for r in rows}),
        "before": before,
        "after": after,
    }


clustering.may_create_table = True  # type: ignore[attr-defined]  # reads its own table (see delta/optimize.py)
