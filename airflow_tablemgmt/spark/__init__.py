"""The Spark side: Java / jar / catalog configuration, the submission description, and the job.

Importing this package (or ``java``, ``launch``, ``conf``, ``submit``, ``result``) never imports
pyspark: the Airflow side uses them to *describe* a submission. Only the modules that run under
``spark-submit`` (``job_main``, ``metrics``, ``schema``, ``maintainers``) touch a SparkSession.
"""
