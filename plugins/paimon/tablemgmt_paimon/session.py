"""What a job on a Paimon table needs of Spark: Paimon's SQL extensions (``CALL``), the job's catalog as a
Paimon ``SparkCatalog`` over the catalog's warehouse, and Paimon's Spark 3.5 runtime jar (the resolver's
``paimon`` need, ``org.apache.paimon:paimon-spark-3.5:0.9.0``). No Iceberg, Delta or Hudi runtime is loaded."""

from __future__ import annotations

from airflow_tablemgmt.spark.job.plugins import FormatSession

SESSION = FormatSession(
    extensions="org.apache.paimon.spark.extensions.PaimonSparkSessionExtensions",
    session_catalog=None,
    needs=("paimon",),
    catalog_impl="org.apache.paimon.spark.SparkCatalog",
    module="tablemgmt_paimon.job",
)
