"""SnapshotReader against real Iceberg tables written by Spark (hadoop catalog) and by pyiceberg (sql)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration, TableNotFound
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.iceberg import SnapshotReader, local_warehouse_path, sqlalchemy_url

if TYPE_CHECKING:
    from tests.integration.iceberg_session import IcebergTables

pytestmark = pytest.mark.integration


def test_reader_agrees_with_spark_and_sees_a_new_commit(
    meta_tables: IcebergTables, meta_catalog: CatalogSpec
) -> None:
    table = meta_tables.create("agree")
    reader = SnapshotReader(meta_catalog)
    first = reader.current_snapshot_id(table)
    assert first is not None and first == meta_tables.snapshot_id(table)
    assert reader.has_new_snapshot(table, first) == (False, first)

    second = meta_tables.insert(table)
    assert second != first
    assert reader.current_snapshot_id(table) == second
    assert reader.has_new_snapshot(table, first) == (True, second)
    assert reader.has_new_snapshot(table, None) == (True, second)


def test_table_without_snapshot(meta_tables: IcebergTables, meta_catalog: CatalogSpec) -> None:
    table = meta_tables.create("empty", rows=0)
    reader = SnapshotReader(meta_catalog)
    assert reader.current_snapshot_id(table) is None
    assert reader.has_new_snapshot(table, None) == (False, None)


def test_pointer_cache_loads_metadata_only_when_the_pointer_moves(
    meta_tables: IcebergTables, meta_catalog: CatalogSpec
) -> None:
    table = meta_tables.create("cache")
    reader = SnapshotReader(meta_catalog)
    pointer = reader.metadata_pointer(table)
    assert pointer.endswith(".metadata.json") and Path(pointer).is_file()
    assert reader.metadata_loads == 0  # reading the pointer alone never parses metadata

    first = reader.current_snapshot_id(table)
    assert reader.metadata_loads == 1
    for _ in range(5):
        assert reader.current_snapshot_id(table) == first
    assert reader.metadata_loads == 1

    second = meta_tables.insert(table)
    assert reader.metadata_pointer(table) != pointer
    assert reader.current_snapshot_id(table) == second
    assert reader.metadata_loads == 2

    reader.forget(table)
    assert reader.current_snapshot_id(table) == second
    assert reader.metadata_loads == 3


def test_hint_lagging_behind_a_commit_is_read_ahead(
    meta_tables: IcebergTables, meta_catalog: CatalogSpec
) -> None:
    # A writer creates v<N+1>.metadata.json before it rewrites version-hint.text; a reader that
    # trusted the hint alone would miss that commit.
    table = meta_tables.create("lag")
    latest = meta_tables.insert(table)
    hint = meta_tables.dir(table) / "metadata" / "version-hint.text"
    current = int(hint.read_text().strip())
    hint.write_text(str(current - 1))
    assert SnapshotReader(meta_catalog).current_snapshot_id(table) == latest


def test_missing_hint_falls_back_to_the_highest_version(
    meta_tables: IcebergTables, meta_catalog: CatalogSpec
) -> None:
    table = meta_tables.create("nohint")
    latest = meta_tables.insert(table)
    (meta_tables.dir(table) / "metadata" / "version-hint.text").unlink()
    assert SnapshotReader(meta_catalog).current_snapshot_id(table) == latest


def test_file_uri_warehouse_reads_the_same_table(
    meta_tables: IcebergTables, meta_catalog: CatalogSpec
) -> None:
    table = meta_tables.create("uri")
    assert meta_catalog.warehouse is not None
    for warehouse in (f"file://{meta_catalog.warehouse}", f"file:{meta_catalog.warehouse}"):
        reader = SnapshotReader(CatalogSpec(name=meta_catalog.name, warehouse=warehouse))
        assert reader.current_snapshot_id(table) == meta_tables.snapshot_id(table)


def test_missing_table_names_the_table_and_the_path(
    meta_tables: IcebergTables, meta_catalog: CatalogSpec
) -> None:
    reader = SnapshotReader(meta_catalog)
    missing = TableIdentifier(meta_catalog.name, "db", "does_not_exist")
    with pytest.raises(TableNotFound) as err:
        reader.current_snapshot_id(missing)
    message = str(err.value)
    assert str(missing) in message
    assert str(meta_tables.dir(missing) / "metadata" / "version-hint.text") in message


def test_dropped_table_directory_is_table_not_found(
    meta_tables: IcebergTables, meta_catalog: CatalogSpec
) -> None:
    table = meta_tables.create("gone")
    reader = SnapshotReader(meta_catalog)
    assert reader.current_snapshot_id(table) is not None
    shutil.rmtree(meta_tables.dir(table))
    with pytest.raises(TableNotFound, match=str(table)):
        reader.current_snapshot_id(table)


def test_table_of_another_catalog_is_refused(meta_catalog: CatalogSpec) -> None:
    with pytest.raises(InvalidDeclaration, match="other.db.t is in catalog 'other'"):
        SnapshotReader(meta_catalog).current_snapshot_id(TableIdentifier.parse("other.db.t"))


def test_jdbc_catalog_reads_through_pyiceberg_sql_catalog(tmp_path: Path) -> None:
    """A ``jdbc`` catalog (Iceberg's JdbcCatalog layout) is read with pyiceberg's sql catalog."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    db = tmp_path / "catalog.db"
    writer = SqlCatalog("lakedb", uri=f"sqlite:///{db}", warehouse=f"file://{tmp_path / 'wh'}")
    writer.create_namespace("db")
    written = writer.create_table("db.events", schema=pa.schema([pa.field("id", pa.int64())]))

    reader = SnapshotReader(CatalogSpec(name="lakedb", type="jdbc", properties={"uri": f"jdbc:sqlite:{db}"}))
    table = TableIdentifier("lakedb", "db", "events")
    assert reader.current_snapshot_id(table) is None
    written.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    snapshot = written.current_snapshot()
    assert snapshot is not None
    assert reader.current_snapshot_id(table) == snapshot.snapshot_id
    assert reader.metadata_pointer(table) == writer.load_table("db.events").metadata_location
    with pytest.raises(TableNotFound, match="lakedb.db.nope"):
        reader.current_snapshot_id(TableIdentifier("lakedb", "db", "nope"))


def test_warehouse_and_jdbc_url_translation() -> None:
    assert local_warehouse_path("/w") == "/w"
    assert local_warehouse_path("file:///w/x") == "/w/x"
    assert local_warehouse_path("file:/w/x") == "/w/x"
    assert local_warehouse_path("s3a://bucket/w") is None
    assert (
        sqlalchemy_url("jdbc:postgresql://db:5432/ice", "u", "p@ss")
        == "postgresql+psycopg2://u:p%40ss@db:5432/ice"
    )
    assert sqlalchemy_url("jdbc:sqlite:/tmp/c.db") == "sqlite:////tmp/c.db"
    assert sqlalchemy_url("postgresql://x/y") == "postgresql://x/y"
    with pytest.raises(InvalidDeclaration, match="'oracle'.*supported: mysql, postgresql, sqlite"):
        sqlalchemy_url("jdbc:oracle:thin:@h:1521/x")


def test_metadata_json_is_read_as_pyiceberg_reads_it(
    meta_tables: IcebergTables, meta_catalog: CatalogSpec
) -> None:
    """A local metadata file is read as JSON (no pyiceberg model); the state must be pyiceberg's,
    ancestry and operations included, for appends, a compaction (``replace``) and a delete."""
    import json

    from pyiceberg.table import StaticTable

    from airflow_tablemgmt.metadata.iceberg import _state_of, _state_of_document

    table = meta_tables.create("json_state", rows=4)
    meta_tables.insert(table, rows=3)
    meta_tables.spark.sql(
        f"CALL {table.catalog}.system.rewrite_data_files(table => '{table.namespace}.{table.name}', options => map('min-input-files', '2'))"
    )
    meta_tables.spark.sql(f"DELETE FROM {table} WHERE id = 0")
    pointer = SnapshotReader(meta_catalog).metadata_pointer(table)
    expected = _state_of(StaticTable.from_metadata(pointer).metadata)
    got = _state_of_document(json.loads(Path(pointer).read_text()))
    assert got == expected
    assert [op for _, op in got.ancestry][:2] != [None, None] and "replace" in [op for _, op in got.ancestry]
    assert SnapshotReader(meta_catalog).current_state(table) == expected
