"""A shared in-process SparkSession (local[2], Iceberg hadoop catalog ``lake`` on a tmp warehouse).

Maintainer functions are called directly against it; only ``test_spark_submit.py`` goes through
a real ``spark-submit``. Tables get unique names so tests share the session but not state.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.conf import base_conf, catalog_conf
from airflow_tablemgmt.spark.launch.java import resolve_java_home
from tests.integration.iceberg_session import runtime_jar
from tests.integration.spark.spark_tables import TableFactory, Tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CATALOG = "lake"
NAMESPACE = "db"
_names = itertools.count()


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def catalog(warehouse: Path) -> CatalogSpec:
    return CatalogSpec(name=CATALOG, warehouse=str(warehouse))


@pytest.fixture(scope="session")
def spark(catalog: CatalogSpec) -> Iterator[SparkSession]:
    jar = runtime_jar()
    os.environ["JAVA_HOME"] = resolve_java_home()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("tablemgmt-integration")
    for key, value in {**base_conf(), **catalog_conf(catalog), "spark.jars": str(jar)}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    yield session
    session.stop()


@pytest.fixture
def make_table(spark: SparkSession) -> TableFactory:
    """``make_table("id bigint, p string", partitioned_by="p", props={...})`` -> a new empty table."""

    def make(
        columns: str,
        *,
        partitioned_by: str | None = None,
        props: dict[str, str] | None = None,
        prefix: str = "t",
    ) -> TableIdentifier:
        table = TableIdentifier(CATALOG, NAMESPACE, f"{prefix}_{next(_names)}")
        sql = f"CREATE TABLE {table.quoted} ({columns}) USING iceberg"
        if partitioned_by:
            sql += f" PARTITIONED BY ({partitioned_by})"
        if props:
            sql += " TBLPROPERTIES (" + ", ".join(f"'{k}'='{v}'" for k, v in props.items()) + ")"
        spark.sql(sql)
        return table

    return make


@pytest.fixture
def tables(spark: SparkSession, warehouse: Path) -> Tables:
    return Tables(spark, warehouse)
