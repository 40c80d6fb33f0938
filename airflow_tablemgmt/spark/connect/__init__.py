"""Spark Connect: the second execution engine, a long-lived Spark server that the Airflow task drives
over gRPC as a thin client (no JVM in the worker).

* ``server.py`` - launching a local Connect server: its ``spark-submit`` command with the resolved jars
  (the Iceberg runtime and ``spark-connect_2.12``), never ``--packages``. No pyspark at import.
* ``session.py`` - the client side: one remote session per job (its own server-side session, so
  concurrent tables never see each other's catalogs), the catalog's settings applied as that session's
  configuration (never on a command line), operation tags and ``interruptTag`` for cancel/kill, and
  ``run_on_connect`` which runs the same ``spark/job`` code (``main.run_job``) over it.
* ``kept.py`` - a planned batch's tables one after another on a session it keeps per catalog (each its
  own tag, guard job and result; only a clean job hands it on), and one guard process for its jobs.
* ``pool.py`` - a server's slot limit as tasks see it: wait for a free slot (``store/connect_slots.py``),
  renew its lease while the job runs, give it back; ``ConnectBusy`` when none frees in time.
* ``warm.py`` - imported from ``airflow_local_settings.py``: the client and the job code imported once in
  the scheduler, inherited by every forked task process.
* ``errors.py`` - what the Connect engine can refuse: an unreachable server, an action that needs the
  driver's JVM (a dynamic table's refresh, whose plan check reads the analysed plan through py4j).

Importing this package, ``server`` or ``errors`` never imports pyspark.
"""
