"""Apache Paimon tables for airflow-tablemgmt, as a format plugin.

``format`` (the descriptor, the ``paimon`` entry point of ``airflow_tablemgmt.formats``), ``factory`` (the
scheduler's side: its ProcessFactory) and ``job`` (the Spark driver's side: the maintainers, calling Paimon's
Spark procedures) are imported by airflow-tablemgmt when needed; this module imports nothing.
"""

FORMAT = "paimon"
#: Paimon's Spark 3.5 runtime on Maven Central (the 1.x releases are not served by every mirror).
PAIMON_SPARK = "org.apache.paimon:paimon-spark-3.5:0.9.0"
