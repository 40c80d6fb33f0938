"""What a job on a Paimon table needs of Spark: Paimon's SQL extensions (``CALL``), the job's catalog as a
Paimon ``SparkCatalog`` over the catalog's warehouse, and Paimon's Spark 3.5 runtime jar (``PAIMON_SPARK``, the resolver's
``paimon`` need). No Iceberg, Delta or Hudi runtime is loaded."""

from __future__ import annotations

from airflow_tablemgmt.formats.api import FormatSession
from tablemgmt_paimon import PAIMON_SPARK

SESSION = FormatSession(
    extensions="org.apache.paimon.spark.extensions.PaimonSparkSessionExtensions",
    session_catalog=None,
    needs=("paimon",),
    catalog_impl="org.apache.paimon.spark.SparkCatalog",
    module="tablemgmt_paimon.job",
    jars=(PAIMON_SPARK,),
)
