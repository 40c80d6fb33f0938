"""Iceberg's maintainers, one small function per action: ``(spark, table, options, *, early=None) ->
summary``, through Iceberg's Spark procedures. Each summary carries ``before`` / ``after`` table metrics plus
what Iceberg reported; ``early`` is what the job read of the table before the maintainer ran
(``spark/job/metrics.FirstRead``). Iceberg hosts dynamic tables, whose ``refresh`` (``spark/job/refresh.py``)
runs in the same session."""

from __future__ import annotations

from typing import Any

from airflow_tablemgmt.formats.iceberg.job.compaction import rewrite_deletes, rewrite_files, rewrite_manifests
from airflow_tablemgmt.formats.iceberg.job.orphans import delete_orphans
from airflow_tablemgmt.formats.iceberg.job.snapshots import expire_snapshots
from airflow_tablemgmt.formats.iceberg.job.stats import compute_stats
from airflow_tablemgmt.formats.iceberg.job.ttl import expire_data
from airflow_tablemgmt.spark.job.commit_mark import ACTION, ATTEMPT, PROCESS
from airflow_tablemgmt.spark.job.maintainers import Maintainer
from airflow_tablemgmt.spark.job.refresh import refresh

#: What the job runs for each action (the descriptor's session names this module).
MAINTAINERS: dict[str, Maintainer] = {
    "rewrite-files": rewrite_files,
    "rewrite-deletes": rewrite_deletes,
    "rewrite-manifests": rewrite_manifests,
    "expire-snapshots": expire_snapshots,
    "delete-orphans": delete_orphans,
    "expire-data": expire_data,
    "compute-stats": compute_stats,
    "refresh": refresh,
}


def mark_commits(spark: Any, mark: dict[str, str], *, remote: bool) -> None:
    """Iceberg's ``EnvironmentContext``: every snapshot Iceberg produces (a procedure's rewrite, a DataFrame
    write) copies its entries into the snapshot's summary. Iceberg 1.10's procedures take no snapshot
    properties, and the context is global to the JVM, so it is set only in a spark-submit driver, which runs
    one job; never on a shared Spark Connect server."""
    if remote:
        return
    context = _environment_context(spark)
    for key, value in mark.items():
        context.put(key, value)


def unmark_commits(spark: Any, *, remote: bool) -> None:
    if remote:
        return
    context = _environment_context(spark)
    for key in (PROCESS, ATTEMPT, ACTION):
        context.remove(key)


def _environment_context(spark: Any) -> Any:
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - the JVM-wide context has no Python API
    assert jvm is not None
    return jvm.org.apache.iceberg.EnvironmentContext


__all__ = ["MAINTAINERS", "mark_commits", "unmark_commits"]
