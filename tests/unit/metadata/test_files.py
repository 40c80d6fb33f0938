"""metadata/files.py on a real Iceberg table (a SQL catalog on SQLite, pyiceberg only, no JVM): the
health figures and a job's table shape are two readings of the same manifest walk, so they agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.files import read_file_stats, read_shape


@pytest.fixture
def lake(tmp_path: Path) -> tuple[CatalogSpec, Any]:
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"file://{tmp_path / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("sales")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    table = cat.create_table("sales.orders", schema=schema)
    for i in range(3):  # three appends: three data files, three snapshots
        table.append(pa.table({"id": [i * 10 + j for j in range(10)], "v": ["x"] * 10}, schema=schema))
    catalog = CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri})
    return catalog, cat.load_table("sales.orders")


def test_file_stats_and_shape_read_the_same_files(lake: tuple[CatalogSpec, Any]) -> None:
    catalog, table = lake
    spec = TableSpec(catalog="lake", namespace="sales", name="orders")

    stats = read_file_stats(catalog, spec)
    shape = read_shape(table.metadata_location, {})

    assert (stats.data_files, stats.records, stats.snapshots) == (3, 30, 3)
    assert stats.delete_files == 0 and stats.small_data_files == 3
    figures = shape.metrics(live_records=shape.physical_rows)
    assert figures["data_files"] == stats.data_files
    assert figures["data_bytes"] == stats.data_bytes
    assert figures["physical_rows"] == stats.records
    assert figures["snapshots"] == stats.snapshots
    assert figures["current_snapshot_id"] == stats.snapshot_id
    assert figures["delete_files"] == stats.delete_files == 0
    assert figures["manifests"] == 3 and figures["files_per_partition_max"] == 3


def test_an_unreadable_table_is_health_unavailable(lake: tuple[CatalogSpec, Any], tmp_path: Path) -> None:
    catalog, table = lake
    for path in (tmp_path / "wh").rglob("*.metadata.json"):
        path.write_text("not json")
    with pytest.raises(HealthUnavailable, match="lake.sales.orders: cannot read its Iceberg metadata"):
        read_file_stats(catalog, TableSpec(catalog="lake", namespace="sales", name="orders"))
