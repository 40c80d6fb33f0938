"""Compaction: ``rewrite_data_files``, ``rewrite_position_delete_files``, ``rewrite_manifests``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.formats.iceberg.actions import (
    RewriteDeletesSettings,
    RewriteFilesSettings,
    RewriteManifestsSettings,
    RewriteStrategy,
)
from airflow_tablemgmt.spark.job import literals
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.job.metrics import FirstRead, metrics_after, metrics_before
from airflow_tablemgmt.spark.job.procedures import call_procedure
from airflow_tablemgmt.spark.job.schema import resolve_columns
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def sort_order(strategy: RewriteStrategy, columns: list[str]) -> str:
    """Iceberg's ``sort_order`` argument: ``a ASC NULLS LAST, ...`` or ``zorder(a, b)``."""
    quoted = [quote(c) for c in columns]
    if strategy == RewriteStrategy.ZORDER:
        return f"zorder({', '.join(quoted)})"
    return ", ".join(f"{q} ASC NULLS LAST" for q in quoted)


def rewrite_files(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: FirstRead | None = None
) -> dict[str, Any]:
    """Compact small files (binpack) or recluster them (sort / zorder) with ``rewrite_data_files``."""
    s = parse_settings(RewriteFilesSettings, options, "rewrite-files")
    args: dict[str, str] = {}
    order: str | None = None
    if s.strategy == RewriteStrategy.BINPACK:
        args["strategy"] = literals.string("binpack")
    else:
        fields = resolve_columns(spark, table, s.sort_columns, "rewrite-files.sort-columns")
        order = sort_order(s.strategy, [f.name for f in fields])
        args["strategy"] = literals.string("sort")
        args["sort_order"] = literals.string(order)
    args["options"] = literals.string_map(
        {
            "target-file-size-bytes": s.target_file_size_bytes,
            "min-input-files": s.min_input_files,
            "partial-progress.enabled": s.partial_progress,
            "max-concurrent-file-group-rewrites": s.max_concurrent_file_group_rewrites,
            "rewrite-all": s.rewrite_all,
        }
    )
    if s.where:
        args["where"] = literals.string(s.where)

    before = metrics_before(spark, table, early=early)
    log.info("rewriting data files of %s (strategy %s)", table, s.strategy.value)
    with timed("procedure"):
        rows = call_procedure(spark, table, "rewrite_data_files", args)
    after = metrics_after(spark, table, before)
    log.info(
        "rewrote data files of %s: %d -> %d data files", table, before["data_files"], after["data_files"]
    )
    return {
        "strategy": s.strategy.value,
        "sort_order": order,
        "where": s.where,
        **(rows[0] if rows else {}),
        "before": before,
        "after": after,
    }


def rewrite_deletes(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: FirstRead | None = None
) -> dict[str, Any]:
    """Compact position delete files (dropping dangling ones) with ``rewrite_position_delete_files``."""
    s = parse_settings(RewriteDeletesSettings, options, "rewrite-deletes")
    args = {
        "options": literals.string_map({"min-input-files": s.min_input_files, "rewrite-all": s.rewrite_all})
    }
    before = metrics_before(spark, table, early=early)
    log.info("rewriting position delete files of %s", table)
    with timed("procedure"):
        rows = call_procedure(spark, table, "rewrite_position_delete_files", args)
    after = metrics_after(spark, table, before)
    log.info(
        "rewrote position delete files of %s: %d -> %d delete files",
        table,
        before["position_delete_files"],
        after["position_delete_files"],
    )
    return {**(rows[0] if rows else {}), "before": before, "after": after}


def rewrite_manifests(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: FirstRead | None = None
) -> dict[str, Any]:
    """Regroup manifests by partition with ``rewrite_manifests``."""
    s = parse_settings(RewriteManifestsSettings, options, "rewrite-manifests")
    before = metrics_before(spark, table, early=early)
    log.info("rewriting manifests of %s", table)
    with timed("procedure"):
        rows = call_procedure(
            spark, table, "rewrite_manifests", {"use_caching": literals.boolean(s.use_caching)}
        )
    after = metrics_after(spark, table, before)
    log.info("rewrote manifests of %s: %d -> %d manifests", table, before["manifests"], after["manifests"])
    return {**(rows[0] if rows else {}), "before": before, "after": after}
