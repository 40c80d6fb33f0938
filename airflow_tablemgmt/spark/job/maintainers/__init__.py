"""One small maintainer function per action: ``(spark, table, options, *, early=None) -> summary``.

Each summary carries ``before`` / ``after`` table metrics plus what Iceberg reported; ``early`` is what
the job read of the table before the maintainer ran (``metrics.FirstRead``), for the metrics before.

These are the Iceberg maintainers. Maintainers of another table format (Hudi, Delta, Paimon) go in a
package of their own beside these, ``spark/job/maintainers/<format>/`` with its own ``MAINTAINERS``,
chosen by the job spec's format; they share ``metrics``/``procedures``/``schema`` only where the
format's metadata allows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.spark.job.maintainers.compaction import (
    rewrite_deletes,
    rewrite_files,
    rewrite_manifests,
)
from airflow_tablemgmt.spark.job.maintainers.orphans import delete_orphans
from airflow_tablemgmt.spark.job.maintainers.snapshots import expire_snapshots
from airflow_tablemgmt.spark.job.maintainers.stats import compute_stats
from airflow_tablemgmt.spark.job.maintainers.ttl import expire_data
from airflow_tablemgmt.spark.job.metrics import FirstRead
from airflow_tablemgmt.spark.job.refresh import refresh

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Maintainer(Protocol):
    """A maintainer: run the action on ``table`` and return its summary."""

    def __call__(
        self,
        spark: SparkSession,
        table: TableIdentifier,
        options: dict[str, Any],
        *,
        early: FirstRead | None = None,
    ) -> dict[str, Any]: ...


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


def _format_maintainers() -> dict[str, Maintainer]:
    """Delta's and Hudi's maintainers (``maintainers/<format>/``), by their actions' names, which no
    other format uses. Imported here but nothing of their format's runtime is loaded until one runs."""
    from airflow_tablemgmt.spark.job.maintainers.delta import DELTA_MAINTAINERS
    from airflow_tablemgmt.spark.job.maintainers.hudi import HUDI_MAINTAINERS

    return {**DELTA_MAINTAINERS, **HUDI_MAINTAINERS}


MAINTAINERS.update(_format_maintainers())

__all__ = ["MAINTAINERS", "Maintainer"]
