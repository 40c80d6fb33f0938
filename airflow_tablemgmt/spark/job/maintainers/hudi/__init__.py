"""Hudi maintainers: ``compaction`` (RFC-43's two phases: schedule an instant, execute it) and ``clean``,
as Hudi's Spark procedures in a session built with Hudi's extensions, catalog and Kryo serializer only."""

from __future__ import annotations

from airflow_tablemgmt.spark.job.maintainers.hudi.clean import clean
from airflow_tablemgmt.spark.job.maintainers.hudi.compaction import compaction

HUDI_MAINTAINERS = {"compaction": compaction, "clean": clean}

__all__ = ["HUDI_MAINTAINERS"]
