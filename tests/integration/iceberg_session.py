"""Small Iceberg tables written by an in-process SparkSession, for tests that read them back
with pyiceberg. One JVM per pytest run: a later caller reuses the running session and only adds
its own catalog to it."""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.hooks.airflow_settings import artifact_settings
from airflow_tablemgmt.spark.conf import base_conf, catalog_conf
from airflow_tablemgmt.spark.errors import ArtifactError
from airflow_tablemgmt.spark.launch.artifacts import iceberg_runtime_jar
from airflow_tablemgmt.spark.launch.java import resolve_java_home

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAMESPACE = "db"
MISSING_JAR = (
    "Iceberg runtime jar not available: pip install 'airflow-provider-tablemgmt[embedded]' or reach Maven"
)


def runtime_jar() -> Path:
    """Iceberg's Spark runtime (the wheel's, the jar cache's, or fetched from Maven); skipped locally when
    none can be had, a failure under ``CI=true``."""
    try:
        return iceberg_runtime_jar(artifact_settings())
    except ArtifactError as e:
        skip_unless_ci(f"{MISSING_JAR}: {e}")
        raise


def running_in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def skip_unless_ci(message: str) -> NoReturn:
    """Skip locally, fail under ``CI=true``: CI must never pass by silently not running a suite."""
    if running_in_ci():
        pytest.fail(f"{message} (CI=true: a missing prerequisite fails instead of skipping)")
    pytest.skip(message)


class IcebergTables:
    """Create, append to and inspect small Iceberg tables through Spark."""

    def __init__(self, spark: SparkSession, warehouse: Path, catalog: str) -> None:
        self.spark = spark
        self.warehouse = warehouse
        self.catalog = catalog
        self._names = itertools.count()

    def create(self, prefix: str = "t", rows: int = 1) -> TableIdentifier:
        """A new table with ``rows`` > 0 -> one snapshot; ``rows=0`` -> no snapshot."""
        table = TableIdentifier(self.catalog, NAMESPACE, f"{prefix}_{next(self._names)}")
        self.spark.sql(f"CREATE TABLE {table.quoted} (id BIGINT, v STRING) USING iceberg")
        if rows:
            self.insert(table, rows)
        return table

    def insert(self, table: TableIdentifier, rows: int = 1) -> int:
        """Append ``rows`` rows (one commit) and return the new current snapshot id as Spark sees it."""
        values = ", ".join(f"({i}, 'v{i}')" for i in range(rows))
        self.spark.sql(f"INSERT INTO {table.quoted} VALUES {values}")
        snapshot_id = self.snapshot_id(table)
        assert snapshot_id is not None
        return snapshot_id

    def snapshot_id(self, table: TableIdentifier) -> int | None:
        row = self.spark.sql(
            f"SELECT snapshot_id FROM {table.quoted}.history WHERE is_current_ancestor "
            "ORDER BY made_current_at DESC LIMIT 1"
        ).first()
        return None if row is None else int(row.snapshot_id)

    def dir(self, table: TableIdentifier) -> Path:
        return self.warehouse / table.namespace / table.name


def start_spark(catalog: CatalogSpec) -> tuple[SparkSession, bool]:
    """``(session, created_here)``; reuses a running session and adds ``catalog`` to it."""
    jar = runtime_jar()
    os.environ.setdefault("JAVA_HOME", resolve_java_home())
    # py4j logs "Closing down clientserver connection" from __del__ at exit, after pytest closed the stream.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    existing = SparkContext._active_spark_context
    builder = SparkSession.builder.master("local[2]").appName("tablemgmt-integration")
    builder = builder.config("spark.ui.showConsoleProgress", "false")  # progress bars flood test output
    for key, value in {**base_conf(), **catalog_conf(catalog), "spark.jars": str(jar)}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session, existing is None


def iceberg_tables(catalog: CatalogSpec) -> Iterator[IcebergTables]:
    """Body of a session fixture: a session with ``catalog`` and its namespace, stopped if started here."""
    spark, created = start_spark(catalog)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{catalog.name}`.`{NAMESPACE}`")
    assert catalog.warehouse is not None
    yield IcebergTables(spark, Path(catalog.warehouse), catalog.name)
    if created:
        spark.stop()
