"""One small maintainer function per action: ``(spark, table, options) -> summary``.

Each summary carries ``before`` / ``after`` table metrics plus what Iceberg reported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.spark.maintainers.compaction import rewrite_deletes, rewrite_files, rewrite_manifests
from airflow_tablemgmt.spark.maintainers.orphans import delete_orphans
from airflow_tablemgmt.spark.maintainers.snapshots import expire_snapshots
from airflow_tablemgmt.spark.maintainers.stats import compute_stats
from airflow_tablemgmt.spark.maintainers.ttl import expire_data
from airflow_tablemgmt.spark.refresh import refresh

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Maintainer = Callable[["SparkSession", TableIdentifier, dict[str, Any]], dict[str, Any]]

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

__all__ = ["MAINTAINERS", "Maintainer"]
