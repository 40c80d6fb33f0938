"""The driver program that runs under spark-submit (``main.py``) and everything it runs: the session,
the early read, the metrics, the maintainers (``maintainers/``, Iceberg's; another format's go in
``maintainers/<format>/``) and the dynamic-table refresh.

It imports only ``core``, ``metadata`` and the shared ``spark`` modules (``conf``, ``protocol``,
``errors``): never ``spark.launch``, factories, hooks, lifecycle or the store. This package file
stays empty, so importing one module does not import the rest.
"""
