"""The Spark side, two programs and what they share.

* ``launch/`` - the worker side, before any JVM: Java, the jars, the class-data archive, and the
  submission as data (``launch/submit.py``: ``SubmitSpec``, ``run_local``). The Airflow side imports it
  to *describe* a submission; nothing there imports pyspark.
* ``job/`` - the driver program that runs *under* spark-submit (``job/main.py``): the session, the
  early read, the metrics, the maintainers, the refresh job. It never imports ``launch/``, factories,
  hooks, lifecycle or the store (the "driver" contract in pyproject.toml).
* shared by both: ``conf.py`` (catalog and session settings, the job spec's catalog), ``protocol.py``
  (the one JSON result line the job prints and the launcher parses) and ``errors.py``.

Room to grow: a second launcher, Spark Connect (a remote session instead of a spark-submit of
``job/main.py``), is its own package beside ``launch/``, ``spark/connect/`` (DESIGN.md: a session per
process, operation tags and interrupt), and runs the same ``job/`` code over the connect session,
speaking the same ``protocol.py``. Maintainers of other table
formats (Hudi, Delta, Paimon) go under ``job/maintainers/<format>/``, beside the Iceberg ones.

Importing this package, ``conf``, ``protocol``, ``errors`` or anything under ``launch/`` never imports
pyspark; ``spark/ruff.toml`` bans it (and Airflow) at module level everywhere here.
"""
