"""The table formats, one package each (``iceberg``, ``delta``, ``hudi``), each a plugin of the same shape as
an outside one (plugins/paimon): its ``Format`` descriptor in ``__init__`` (registered under the
``airflow_tablemgmt.formats`` entry point), its factory, and what it reads and runs. ``base`` and ``api``
are what every format builds on; the formats do not import each other (the independence contract)."""
