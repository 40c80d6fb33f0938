"""The worker side of a Spark job, before any JVM starts: Java, which jars a job needs and where they
are, the class-data archive, and the spark-submit command (``submit.py``).

A second launcher (Spark Connect: a remote session, no spark-submit) is its own package beside this
one, ``spark/connect/``. Nothing here imports pyspark or Airflow, and the job (``spark/job/``) never
imports this package.
"""
