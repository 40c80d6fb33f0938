"""The worker side of a Spark job, before any JVM starts: which jars a job needs and where they are.

Nothing here imports pyspark or Airflow.
"""
