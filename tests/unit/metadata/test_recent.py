"""A metadata file walked once per process for a while (``metadata/recent.py``): a table read twice at
the same metadata file (its job's figures after, then its health after; its health gate, then its job's
figures before) reads its manifests once, and the figures are the same as a fresh read's. Real Iceberg
tables (a SQL catalog on SQLite, pyiceberg only, no JVM)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.metadata import recent
from airflow_tablemgmt.metadata.files import read_file_stats, read_shape
from airflow_tablemgmt.metadata.recent import RecentWalks, Walk

SPEC = TableSpec(catalog="lake", namespace="sales", name="orders")
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[CatalogSpec, Any]:
    from pyiceberg.catalog.sql import SqlCatalog

    monkeypatch.setattr(recent, "RECENT", RecentWalks())  # this test's own, whatever ran before
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"file://{tmp_path / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("sales")
    table = cat.create_table("sales.orders", schema=SCHEMA)
    for i in range(3):
        table.append(pa.table({"id": [i * 10 + j for j in range(10)], "v": ["x"] * 10}, schema=SCHEMA))
    return CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri}), cat


@pytest.fixture
def avro_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every manifest list and manifest pyiceberg opens (their files end in ``.avro``)."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    opened: list[str] = []
    original = PyArrowFileIO.new_input

    def new_input(self: Any, location: str) -> Any:
        if location.endswith(".avro"):
            opened.append(location)
        return original(self, location)

    monkeypatch.setattr(PyArrowFileIO, "new_input", new_input)
    return opened


def test_the_health_read_after_a_jobs_figures_at_the_same_metadata_file_reads_no_manifest_again(
    lake: tuple[CatalogSpec, Any], avro_opens: list[str]
) -> None:
    catalog, cat = lake
    location = cat.load_table("sales.orders").metadata_location
    shape = read_shape(location, {})  # the job's figures after
    walked = len(avro_opens)
    assert walked == 4  # the manifest list and three manifests

    stats = read_file_stats(catalog, SPEC, now=1e9)  # the health measured after the table's process
    assert len(avro_opens) == walked  # nothing read again (it read all four again before)
    assert shape.current_snapshot_id == stats.snapshot_id and shape.physical_rows == stats.records == 30

    recent.RECENT.clear()
    fresh = read_file_stats(catalog, SPEC, now=1e9)
    assert len(avro_opens) == 2 * walked and fresh == stats  # a fresh read finds the same figures


def test_a_new_commit_or_a_metadata_file_written_again_is_read_anew(
    lake: tuple[CatalogSpec, Any], avro_opens: list[str]
) -> None:
    catalog, cat = lake
    before = read_file_stats(catalog, SPEC)
    table = cat.load_table("sales.orders")
    table.append(pa.table({"id": [99], "v": ["y"]}, schema=SCHEMA))
    after = read_file_stats(catalog, SPEC)
    assert (before.data_files, after.data_files) == (3, 4)

    # the same path written again (a hadoop table dropped and created anew): its size and time differ
    location = cat.load_table("sales.orders").metadata_location
    read_shape(location, {})
    path = Path(location.removeprefix("file://"))
    doc = json.loads(path.read_text())
    doc["properties"] = {**doc.get("properties", {}), "written": "again"}
    path.write_text(json.dumps(doc))
    opened = len(avro_opens)
    read_shape(location, {})
    assert len(avro_opens) > opened


def test_walks_are_kept_for_a_while_and_bounded() -> None:
    now = [0.0]
    walks = RecentWalks(clock=lambda: now[0])
    loads: list[str] = []

    def load(name: str, entries: int = 1) -> Any:
        def walk() -> Walk:
            loads.append(name)
            return Walk(None, (), tuple(range(entries)))

        return walk

    walks.walk("s3://b/t/metadata/v1.metadata.json", load("a"))
    walks.walk("s3://b/t/metadata/v1.metadata.json", load("a"))
    assert loads == ["a"]
    now[0] = recent.TTL_S + 1
    walks.walk("s3://b/t/metadata/v1.metadata.json", load("a"))
    assert loads == ["a", "a"]  # too old: read again
    for i in range(recent.SIZE + 1):
        walks.walk(f"s3://b/{i}.metadata.json", load(str(i)))
    walks.walk("s3://b/0.metadata.json", load("0"))
    assert loads[-1] == "0" and loads.count("0") == 2  # the oldest location was let go
    walks.walk("s3://b/big.metadata.json", load("big", recent.MAX_ENTRIES + 1))
    walks.walk("s3://b/big.metadata.json", load("big", recent.MAX_ENTRIES + 1))
    assert loads.count("big") == 2  # a table that large is not kept
