"""Hudi maintainers: ``compaction`` (RFC-43's two phases: schedule an instant, execute it), ``clean`` and
``clustering`` (linear, z-order, hilbert) and ``archive``,
as Hudi's Spark procedures in a session built with Hudi's extensions, catalog and Kryo serializer only."""

from __future__ import annotations

from airflow_tablemgmt.spark.job.maintainers.hudi.archive import archive
from airflow_tablemgmt.spark.job.maintainers.hudi.clean import clean
from airflow_tablemgmt.spark.job.maintainers.hudi.clustering import clustering
from airflow_tablemgmt.spark.job.maintainers.hudi.compaction import compaction

HUDI_MAINTAINERS = {
    "compaction": compaction,
    "clean": clean,
    "clustering": clustering,
    "archive": archive,
}

__all__ = ["HUDI_MAINTAINERS"]
