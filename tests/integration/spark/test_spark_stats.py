"""compute-stats: a Puffin statistics file is written and registered in the table metadata."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_tablemgmt.formats.iceberg.job.stats import compute_stats
from airflow_tablemgmt.spark.errors import ColumnNotFound
from tests.integration.spark.spark_tables import TableFactory, Tables

pytestmark = pytest.mark.integration


def _current_metadata(table_dir: Path) -> dict[str, object]:
    version = (table_dir / "metadata" / "version-hint.text").read_text().strip()
    return json.loads((table_dir / "metadata" / f"v{version}.metadata.json").read_text())


def test_statistics_file_is_registered(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint, k int, s string")
    spark.sql(f"INSERT INTO {table.quoted} SELECT id, cast(id % 7 AS int), 'x' FROM range(100)")

    summary = compute_stats(spark, table, {"columns": ["id", "k"]})

    path = summary["statistics_file"]
    assert path and Path(path.removeprefix("file:")).is_file()
    assert summary["columns"] == ["id", "k"]
    metadata = _current_metadata(tables.dir(table))
    registered = metadata["statistics"]
    assert isinstance(registered, list)
    assert [s["statistics-path"] for s in registered] == [path]
    assert registered[0]["snapshot-id"] == summary["snapshot_id"]
    assert {b["type"] for b in registered[0]["blob-metadata"]} == {"apache-datasketches-theta-v1"}


def test_unknown_column_is_rejected(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint")
    with pytest.raises(ColumnNotFound, match=r"compute-stats\.columns: column 'nope'"):
        compute_stats(tables.spark, table, {"columns": ["nope"]})
