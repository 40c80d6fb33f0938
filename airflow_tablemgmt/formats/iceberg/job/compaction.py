"""Compaction: ``rewrite_data_files``, ``rewrite_position_delete_files``, ``rewrite_manifests``.

On a table of format version 3, Iceberg 1.10's ``rewrite_position_delete_files`` converts v2 position delete
files into deletion vectors (the table's Puffin files) and returns nothing when the table has none left
(``RewritePositionDeleteFilesSparkAction``: "v2 deletes ... have already been rewritten to v3 DVs"); the
vectors themselves are applied only by ``rewrite_data_files``, which drops a rewritten data file's vector in
the same commit. :func:`rewrite_deletes` says which of these happened (:func:`deletes_outcome`)."""

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
from airflow_tablemgmt.metadata.deletes import in_words
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
    args["options"] = literals.string_map(rewrite_files_options(s))
    if s.where:
        args["where"] = literals.string(s.where)

    before = metrics_before(spark, table, early=early)
    log.info("rewriting data files of %s (strategy %s)", table, s.strategy.value)
    with timed("procedure"):
        rows = call_procedure(spark, table, "rewrite_data_files", args)
    after = metrics_after(spark, table, before, rows_unchanged=True)
    _log_rewrote(table, "data files", rows, before["data_files"])
    return {
        "strategy": s.strategy.value,
        "sort_order": order,
        "where": s.where,
        **(rows[0] if rows else {}),
        "before": before,
        "after": after,
    }


def _log_rewrote(table: TableIdentifier, what: str, rows: list[dict[str, Any]], before: int) -> None:
    """The procedure's own counts (``rewritten_<what>_count``, ``added_<what>_count``): the figures after
    the action may be read after the job (``metrics_after``'s ``rows_unchanged``)."""
    out, key = (rows[0] if rows else {}), what.replace(" ", "_")
    log.info(
        "rewrote %s of %s: %s of %d %s into %s",
        what,
        table,
        out.get(f"rewritten_{key}_count"),
        before,
        what,
        out.get(f"added_{key}_count"),
    )


def rewrite_files_options(s: RewriteFilesSettings) -> dict[str, Any]:
    """``rewrite_data_files``' ``options`` map: the delete thresholds only when set (Iceberg's defaults
    otherwise: 0.3 of a file's rows, no delete-file count)."""
    options: dict[str, Any] = {
        "target-file-size-bytes": s.target_file_size_bytes,
        "min-input-files": s.min_input_files,
        "partial-progress.enabled": s.partial_progress,
        "max-concurrent-file-group-rewrites": s.max_concurrent_file_group_rewrites,
        "rewrite-all": s.rewrite_all,
        "remove-dangling-deletes": s.remove_dangling_deletes,
    }
    if s.delete_ratio_threshold is not None:
        options["delete-ratio-threshold"] = s.delete_ratio_threshold
    if s.delete_file_threshold is not None:
        options["delete-file-threshold"] = s.delete_file_threshold
    return options


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
    summary = {**(rows[0] if rows else {}), "before": before, "after": after}
    summary["format_version"] = version = format_version(spark, table)
    if version is not None and version >= 3:
        summary.update(deletes_outcome(before, after, s))
        log.info("%s (format version %d): %s", table, version, summary["outcome"])
    return summary


def format_version(spark: SparkSession, table: TableIdentifier) -> int | None:
    """The table's format version, as Iceberg's Spark table reports it among its properties (a catalog
    call, no Spark job); None when it does not say."""
    rows = spark.sql(f"SHOW TBLPROPERTIES {table.quoted} ('format-version')").collect()
    try:
        return int(rows[0]["value"]) if rows else None
    except (TypeError, ValueError):
        return None


def deletes_outcome(
    before: dict[str, Any], after: dict[str, Any], s: RewriteDeletesSettings
) -> dict[str, Any]:
    """What ``rewrite_position_delete_files`` did to a v3 table: the v2 position delete files it converted
    into deletion vectors, or why there was nothing to do, in words (``outcome``) and figures."""
    files, left = int(before["position_delete_files"]), int(after["position_delete_files"])
    dvs, dvs_after = int(before.get("deletion_vectors") or 0), int(after.get("deletion_vectors") or 0)
    converted = max(0, files - left)

    def position(n: int) -> str:
        return f"{n} v2 position delete file{'' if n == 1 else 's'}"

    if not files and dvs:
        outcome = (
            f"nothing to do: the table's deletes are {in_words(dvs, 0, 0, dvs)} and no v2 position delete "
            "files (on a v3 table Iceberg converts position delete files into deletion vectors; rewrite-files "
            "applies the vectors: delete-ratio-threshold)"
        )
    elif not files:
        outcome = "nothing to do: the table has no position delete files and no deletion vectors"
    else:
        outcome = (
            f"converted {position(converted)} into deletion vectors ({dvs} -> {dvs_after} deletion vectors)"
            if converted
            else "converted nothing"
        )
        if left:
            why = (
                ""
                if s.rewrite_all
                else f" (their partition's group had fewer than min-input-files, {s.min_input_files}: "
                "rewrite-all: true converts every one)"
            )
            outcome += f"; {position(left)} left{why}"
    return {
        "outcome": outcome,
        "converted_position_delete_files": converted,
        "deletion_vectors_before": dvs,
        "deletion_vectors_after": dvs_after,
    }


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
    after = metrics_after(spark, table, before, rows_unchanged=True)
    _log_rewrote(table, "manifests", rows, before["manifests"])
    return {**(rows[0] if rows else {}), "before": before, "after": after}
