"""Hudi maintainers: ``compaction`` (RFC-43's two phases: schedule an instant, execute it), ``clean`` and
``clustering`` (linear, z-order, hilbert) and ``archive``,
as Hudi's Spark procedures in a session built with Hudi's extensions, catalog and Kryo serializer only."""

from __future__ import annotations

from airflow_tablemgmt.formats.hudi.job.archive import archive
from airflow_tablemgmt.formats.hudi.job.clean import clean
from airflow_tablemgmt.formats.hudi.job.clustering import clustering
from airflow_tablemgmt.formats.hudi.job.compaction import compaction

#: What the job runs for each action (the descriptor's session names this module).
MAINTAINERS = {
    "compaction": compaction,
    "clean": clean,
    "clustering": clustering,
    "archive": archive,
}

__all__ = ["MAINTAINERS"]
