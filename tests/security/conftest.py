"""tests/security: one test per way a dynamic table's query could reach beyond the tables of registered
catalogs (issue 22). The Spark-level tests share the integration suite's in-process session (its
fixtures, imported here); the REST tests start a real api-server with the e2e suite's helper."""

from __future__ import annotations

from tests.e2e.conftest import airflow_db  # noqa: F401 - fixtures shared with the e2e suite
from tests.integration.spark.conftest import (  # noqa: F401 - fixtures shared with the Spark suite
    catalog,
    make_table,
    spark,
    tables,
    warehouse,
)
