"""Snapshot expiry: ``expire_snapshots`` with a cutoff computed when the job runs."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.formats.iceberg.actions import KEEP_SNAPSHOTS_OPTION, ExpireSnapshotsSettings
from airflow_tablemgmt.spark.job import literals
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.job.metrics import FirstRead, metadata_table, metrics_after, metrics_before
from airflow_tablemgmt.spark.job.procedures import call_procedure
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# procedure output column -> summary key under "deleted_files"
_DELETED = {
    "deleted_data_files_count": "data",
    "deleted_position_delete_files_count": "position_deletes",
    "deleted_equality_delete_files_count": "equality_deletes",
    "deleted_manifest_files_count": "manifests",
    "deleted_manifest_lists_count": "manifest_lists",
    "deleted_statistics_files_count": "statistics",
}


def expire_snapshots(
    spark: SparkSession,
    table: TableIdentifier,
    options: dict[str, Any],
    *,
    early: FirstRead | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Expire snapshots older than ``older-than`` (a duration before now), keeping ``retain-last``.

    ``now`` (default: the current time) lets tests place the cutoff exactly.
    """
    options = dict(options)
    keep = options.pop(KEEP_SNAPSHOTS_OPTION, None) or {}
    s = parse_settings(ExpireSnapshotsSettings, options, "expire-snapshots")
    cutoff = (now or datetime.now(UTC)) - s.older_than
    cutoff, kept = _keep_for_readers(spark, table, cutoff, keep)
    below_floor = s.below_floor()
    if below_floor:  # the settings model let it through only with allow-below-floor: say so where it acts
        log.warning(
            "expire-snapshots on %s: %s (allow-below-floor is set): snapshots of recent commits expire",
            table,
            "; ".join(below_floor),
        )
    before = metrics_before(spark, table, early=early)
    log.info(
        "expiring snapshots of %s older than %s (retaining %d)", table, cutoff.isoformat(), s.retain_last
    )
    with timed("procedure"):
        rows = call_procedure(
            spark,
            table,
            "expire_snapshots",
            {
                "older_than": literals.timestamp(cutoff),
                "retain_last": literals.integer(s.retain_last),
                "max_concurrent_deletes": literals.integer(s.max_concurrent_deletes),
                "stream_results": literals.boolean(True),
            },
        )
    after = metrics_after(spark, table, before)
    out = rows[0] if rows else {}
    deleted = {key: int(out.get(column) or 0) for column, key in _DELETED.items()}
    expired = before["snapshots"] - after["snapshots"]
    log.info("expired %d snapshots of %s; deleted files: %s", expired, table, deleted)
    return {
        "older_than": cutoff.isoformat(),
        "retain_last": s.retain_last,
        "below_floor": bool(below_floor),
        **({"kept_for_dynamic_tables": kept} if kept else {}),
        "expired_snapshots": expired,
        "deleted_files": deleted,
        "before": before,
        "after": after,
    }


def _keep_for_readers(
    spark: SparkSession, table: TableIdentifier, cutoff: datetime, keep: dict[str, Any]
) -> tuple[datetime, dict[str, int]]:
    """Move ``cutoff`` back to the oldest snapshot ``keep`` names ({dynamic table: snapshot id}) that the
    table still has, so it and every later one survive (Iceberg expires snapshots strictly older than the
    cutoff). Returns the cutoff and what it kept for whom; a snapshot already gone keeps nothing."""
    if not keep:
        return cutoff, {}
    # Epoch milliseconds, as Iceberg compares them (a collected TIMESTAMP would be in this host's zone).
    rows = spark.sql(
        f"SELECT snapshot_id, unix_millis(committed_at) AS ms FROM {metadata_table(table, 'snapshots')}"
    ).collect()
    committed = {int(r.snapshot_id): int(r.ms) for r in rows}
    kept = {reader: int(sid) for reader, sid in keep.items() if int(sid) in committed}
    if not kept:
        return cutoff, {}
    oldest = datetime.fromtimestamp(min(committed[sid] for sid in kept.values()) / 1000, UTC)
    if oldest < cutoff:
        log.info(
            "expire-snapshots on %s: keeping snapshots from %s on, which %s read their next change from",
            table,
            oldest.isoformat(),
            ", ".join(f"{reader} (snapshot {sid})" for reader, sid in sorted(kept.items())),
        )
        cutoff = oldest
    return cutoff, kept
