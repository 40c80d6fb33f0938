"""delete-orphans takes the table's location from the job's first read of the table, not from a Spark
command: ``DESCRIBE TABLE EXTENDED`` (planned and run by Spark only to learn whether the location is on an
object store) cost a delete-orphans job 4-23 s under load. The only Spark statement left is the procedure.

The table is a real Iceberg table written by pyiceberg and laid out as Iceberg's hadoop catalog keeps it
(``version-hint.text``, ``v1.metadata.json``); the job's early read finds it by Iceberg's rule. The Spark
session is a stand-in that answers the procedure's CALL and the py4j table load and records every SQL
statement: no JVM here (tests/integration/spark/test_spark_orphans.py runs the maintainer on Spark).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.formats.iceberg.job.orphans import delete_orphans
from airflow_tablemgmt.spark.job.early_read import EarlyRead, read_early
from airflow_tablemgmt.spark.job.metrics import Loaded, table_location

TABLE = TableIdentifier("lake", "db", "events")


@pytest.fixture
def hadoop_table(tmp_path: Path) -> tuple[CatalogSpec, Path]:
    """A three-file Iceberg table at ``<warehouse>/db/events`` with its hadoop-catalog pointer."""
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = tmp_path / "wh"
    location = warehouse / "db" / "events"
    cat = SqlCatalog("lake", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{warehouse}")
    cat.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64())])
    table = cat.create_table("db.events", schema=schema, location=str(location))
    for i in range(3):
        table.append(pa.table({"id": [i]}, schema=schema))
    current = cat.load_table("db.events").metadata_location.removeprefix("file://")
    shutil.copy(current, location / "metadata" / "v1.metadata.json")
    (location / "metadata" / "version-hint.text").write_text("1")
    return CatalogSpec(name="lake", type=CatalogType.HADOOP, warehouse=str(warehouse)), location


class _Spark:
    """A classic session's stand-in: the procedure's rows, Iceberg's table load through py4j, no conf."""

    def __init__(self, metadata_file: str, location: str) -> None:
        self.statements: list[str] = []
        self.loads: list[str] = []
        iceberg_table = SimpleNamespace(
            location=lambda: location,
            operations=lambda: SimpleNamespace(
                current=lambda: SimpleNamespace(metadataFileLocation=lambda: metadata_file)
            ),
        )

        def load(_jspark: Any, name: str) -> Any:
            self.loads.append(name)
            return iceberg_table

        spark3util = SimpleNamespace(loadIcebergTable=load)
        self._jvm = SimpleNamespace(
            org=SimpleNamespace(
                apache=SimpleNamespace(iceberg=SimpleNamespace(spark=SimpleNamespace(Spark3Util=spark3util)))
            )
        )
        self._jsparkSession = object()
        self.sparkContext = SimpleNamespace(getConf=lambda: SimpleNamespace(getAll=lambda: []))

    def sql(self, statement: str) -> Any:
        self.statements.append(statement)
        if statement.startswith("CALL "):
            return SimpleNamespace(collect=lambda: [])
        raise AssertionError(f"unexpected Spark statement: {statement}")


def test_delete_orphans_runs_the_procedure_and_no_other_spark_statement(
    hadoop_table: tuple[CatalogSpec, Path],
) -> None:
    catalog, location = hadoop_table
    early = read_early(catalog, TABLE)
    assert isinstance(early, EarlyRead)
    spark = _Spark(early.location, str(location))

    summary = delete_orphans(spark, TABLE, {"older-than": "3d"}, early=early)  # type: ignore[arg-type]

    assert len(spark.statements) == 1 and spark.statements[0].startswith(
        "CALL `lake`.system.remove_orphan_files("
    ), spark.statements
    assert "prefix_listing => false" in spark.statements[0]  # a local table: Hadoop's listing
    assert summary["deleted"] == 0
    assert summary["before"]["data_files"] == summary["after"]["data_files"] == 3


def test_the_location_comes_from_the_early_read_without_spark(hadoop_table: tuple[CatalogSpec, Path]) -> None:
    catalog, location = hadoop_table
    early = read_early(catalog, TABLE)
    assert isinstance(early, EarlyRead)
    spark = _Spark(early.location, "/not/asked")

    assert table_location(spark, TABLE, early).removeprefix("file://") == str(location)  # type: ignore[arg-type]
    assert spark.statements == [] and spark.loads == []


def test_the_location_comes_from_the_jobs_table_load() -> None:
    spark = _Spark("s3://b/t/metadata/v3.metadata.json", "/not/asked")
    loaded = Loaded(TABLE, "s3://b/t/metadata/v3.metadata.json", "s3://b/t")

    assert table_location(spark, TABLE, loaded) == "s3://b/t"  # type: ignore[arg-type]
    assert spark.statements == [] and spark.loads == []


def test_without_a_first_read_of_this_table_iceberg_loads_it_once() -> None:
    spark = _Spark("s3://b/t/metadata/v3.metadata.json", "s3://b/t")
    other = Loaded(TableIdentifier("lake", "db", "other"), "s3://b/o/metadata/v1.metadata.json", "s3://b/o")

    assert table_location(spark, TABLE, None) == "s3://b/t"  # type: ignore[arg-type]
    assert table_location(spark, TABLE, other) == "s3://b/t"  # type: ignore[arg-type]
    assert table_location(spark, TABLE, Loaded(TABLE, None)) == "s3://b/t"  # type: ignore[arg-type]
    assert spark.statements == [] and spark.loads == [TABLE.quoted] * 3
