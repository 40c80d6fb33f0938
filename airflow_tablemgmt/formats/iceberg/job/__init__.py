"""Iceberg's maintainers, one small function per action: ``(spark, table, options, *, early=None) ->
summary``, through Iceberg's Spark procedures. Each summary carries ``before`` / ``after`` table metrics plus
what Iceberg reported; ``early`` is what the job read of the table before the maintainer ran
(``spark/job/metrics.FirstRead``). Iceberg hosts dynamic tables, whose ``refresh`` (``spark/job/refresh.py``)
runs in the same session."""

from __future__ import annotations

from airflow_tablemgmt.formats.iceberg.job.compaction import rewrite_deletes, rewrite_files, rewrite_manifests
from airflow_tablemgmt.formats.iceberg.job.orphans import delete_orphans
from airflow_tablemgmt.formats.iceberg.job.snapshots import expire_snapshots
from airflow_tablemgmt.formats.iceberg.job.stats import compute_stats
from airflow_tablemgmt.formats.iceberg.job.ttl import expire_data
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

__all__ = ["MAINTAINERS"]
