"""Orphan-file cleanup: ``remove_orphan_files``, behind a 24-hour floor on ``older-than``.

The floor protects files of commits still in flight. It is checked by the settings model and
again here, right before deleting. ``allow-below-floor: true`` lifts it with a WARNING; since the
procedure itself refuses intervals under 24 hours, that path runs Iceberg's
``DeleteOrphanFiles`` action directly (as Iceberg's own message recommends).

On an object store the table's files are listed through its FileIO (Iceberg's prefix listing), not through
Hadoop's filesystem, which has no ``s3://``; ``equal-schemes``, ``equal-authorities`` and
``prefix-mismatch-mode`` (ERROR by default, never DELETE) decide how listed files match the metadata's paths.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.storage import is_object_store
from airflow_tablemgmt.formats.iceberg.actions import ORPHAN_FLOOR, DeleteOrphansSettings
from airflow_tablemgmt.spark.errors import InvalidJobSpec
from airflow_tablemgmt.spark.job import literals
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.job.metrics import FirstRead, metrics_after, metrics_before, table_location
from airflow_tablemgmt.spark.job.procedures import call_procedure
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def _orphans_below_floor(
    spark: SparkSession,
    table: TableIdentifier,
    cutoff: datetime,
    s: DeleteOrphansSettings,
    prefix_listing: bool,
) -> list[str]:
    jvm = spark._jvm  # noqa: SLF001 - the action API has no SQL entry point
    jspark = spark._jsparkSession  # noqa: SLF001
    assert jvm is not None
    iceberg_table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(jspark, str(table))
    action = jvm.org.apache.iceberg.spark.actions.SparkActions.get(jspark).deleteOrphanFiles(iceberg_table)
    action = action.olderThan(int(cutoff.timestamp() * 1000))
    mode = jvm.org.apache.iceberg.actions.DeleteOrphanFiles.PrefixMismatchMode.valueOf(s.prefix_mismatch_mode)
    action = action.prefixMismatchMode(mode).usePrefixListing(prefix_listing)
    for setter, entries in (
        (action.equalSchemes, s.equal_schemes),
        (action.equalAuthorities, s.equal_authorities),
    ):
        if entries:
            java_map = jvm.java.util.HashMap()
            for k, v in entries.items():
                java_map.put(k, v)
            action = setter(java_map)
    dry_run = s.dry_run
    if dry_run:
        # Any java.util.function.Consumer works; a Stream.Builder just collects the paths.
        action = action.deleteWith(jvm.java.util.stream.Stream.builder())
    locations = action.execute().orphanFileLocations().iterator()
    out = []
    while locations.hasNext():
        out.append(str(locations.next()))
    return out


def delete_orphans(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: FirstRead | None = None
) -> dict[str, Any]:
    """Delete (or, with ``dry-run``, list) files under the table location that nothing references."""
    s = parse_settings(DeleteOrphansSettings, options, "delete-orphans")
    now = datetime.now(UTC)
    cutoff = now - s.older_than
    below_floor = now - cutoff < ORPHAN_FLOOR
    if below_floor and not s.allow_below_floor:
        raise InvalidJobSpec(
            f"delete-orphans.older-than: {s.older_than} is below the 24-hour floor; "
            "allowed: >= 24 hours, or set allow-below-floor: true to override"
        )
    before = metrics_before(spark, table, early=early)
    # The location as the job's first read of the table has it (no Spark command; metrics.table_location).
    prefix_listing = is_object_store(table_location(spark, table, early))
    verb = "listing" if s.dry_run else "deleting"
    log.info("%s orphan files of %s older than %s", verb, table, cutoff.isoformat())
    if below_floor:
        log.warning(
            "delete-orphans on %s with older-than %s, below the 24-hour floor (allow-below-floor is set): "
            "files of commits still in flight may be deleted",
            table,
            s.older_than,
        )
        with timed("procedure"):
            paths = _orphans_below_floor(spark, table, cutoff, s, prefix_listing)
    else:
        with timed("procedure"):
            rows = call_procedure(
                spark,
                table,
                "remove_orphan_files",
                {
                    "older_than": literals.timestamp(cutoff),
                    "dry_run": literals.boolean(s.dry_run),
                    "prefix_listing": literals.boolean(prefix_listing),
                    "prefix_mismatch_mode": literals.string(s.prefix_mismatch_mode),
                    **({"equal_schemes": literals.string_map(s.equal_schemes)} if s.equal_schemes else {}),
                    **(
                        {"equal_authorities": literals.string_map(s.equal_authorities)}
                        if s.equal_authorities
                        else {}
                    ),
                },
            )
        paths = [str(r["orphan_file_location"]) for r in rows]
    after = metrics_after(spark, table, before)
    log.info("%s %d orphan files of %s", "found" if s.dry_run else "deleted", len(paths), table)
    summary: dict[str, Any] = {
        "older_than": cutoff.isoformat(),
        "dry_run": s.dry_run,
        "below_floor": below_floor,
    }
    if s.dry_run:
        summary["would_delete"] = len(paths)
    else:
        summary["deleted"] = len(paths)
    summary["sample"] = sorted(paths)[: s.sample_size]
    summary["before"] = before
    summary["after"] = after
    return summary
