"""``metadata/discovery.py`` lists a ``hadoop`` warehouse without a JVM: each directory whose entries are an
installed format's root markers is a table of that format, named by its path (a namespace of two levels,
a filesystem catalog's ``<db>.db``), with its properties read by its format; what it cannot read is said, so
the listing is incomplete and retires nothing. Tables: an Iceberg table pyiceberg wrote (its metadata named by
``version-hint.text``, as a hadoop catalog's), a Delta table whose ``_delta_log`` is written here as Delta's
protocol lays it out (the ``deltalake`` package is not installed), and a Paimon table's snapshot and schema
files (the Paimon plugin's reader)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_tablemgmt.core.formats import FORMATS
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.discovery import list_catalog

pytestmark = pytest.mark.integration

OPT_OUT = {"tablemgmt.maintenance": "disabled"}


def _iceberg(tmp_path: Path, warehouse: Path, ns: tuple[str, ...], name: str, props: dict[str, str]) -> None:
    """An Iceberg table written by pyiceberg at ``<warehouse>/<ns...>/<name>``, its metadata file named by
    ``metadata/version-hint.text`` (how a hadoop catalog finds it)."""
    from pyiceberg.catalog.sql import SqlCatalog

    client = SqlCatalog("w", uri=f"sqlite:///{tmp_path / 'writer.db'}", warehouse=f"file://{warehouse}")
    client.create_namespace_if_not_exists(ns)
    location = warehouse.joinpath(*ns, name)
    schema = pa.schema([("id", pa.int64())])
    table = client.create_table((*ns, name), schema=schema, location=f"file://{location}", properties=props)
    table.append(pa.table({"id": [1, 2]}, schema=schema))
    current = Path(client.load_table((*ns, name)).metadata_location.removeprefix("file://"))
    (location / "metadata" / "version-hint.text").write_text(current.name)
    client.engine.dispose()


def _delta(root: Path, configuration: dict[str, str]) -> None:
    (root / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"id": [1, 2, 3]}), root / "part-00000.parquet")
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "5f4bd0a4-6b64-4d5c-9c1e-6a2f0c1d2e3f",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": configuration,
                "createdTime": 1764300000000,
            }
        },
        {
            "add": {
                "path": "part-00000.parquet",
                "partitionValues": {},
                "size": (root / "part-00000.parquet").stat().st_size,
                "modificationTime": 1764300000000,
                "dataChange": True,
            }
        },
        {"commitInfo": {"timestamp": 1764300000000, "operation": "WRITE"}},
    ]
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def _paimon(root: Path, options: dict[str, str]) -> None:
    (root / "snapshot").mkdir(parents=True)
    (root / "schema").mkdir()
    fields = [{"id": 0, "name": "id", "type": "BIGINT"}]
    schema = {
        "version": 3,
        "id": 0,
        "fields": fields,
        "partitionKeys": [],
        "primaryKeys": [],
        "options": options,
    }
    (root / "schema" / "schema-0").write_text(json.dumps(schema))
    snapshot = {"version": 3, "id": 1, "schemaId": 0, "commitKind": "APPEND", "timeMillis": 1764300000000}
    (root / "snapshot" / "snapshot-1").write_text(json.dumps(snapshot))
    (root / "snapshot" / "LATEST").write_text("1")


def test_a_warehouse_is_walked_to_each_formats_tables(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    _iceberg(tmp_path, warehouse, ("sales",), "orders", {})
    _iceberg(tmp_path, warehouse, ("sales", "eu"), "orders", OPT_OUT)
    _delta(warehouse / "ops" / "events", {"delta.appendOnly": "true"})
    (warehouse / "ops" / "notes").mkdir()  # a directory with no table in it: an empty namespace
    (warehouse / "ops" / "_tmp").mkdir()  # Spark's and the formats' own directories are not namespaces
    expected = {
        "lake.ops.events": ("delta", {"delta.appendOnly": "true"}),
        "lake.sales.eu.orders": ("iceberg", OPT_OUT),
        "lake.sales.orders": ("iceberg", {}),
    }
    if FORMATS.find("paimon") is not None:
        _paimon(warehouse / "shop.db" / "items", {"bucket": "2"})
        expected["lake.shop.items"] = ("paimon", {"bucket": "2"})

    listing = list_catalog(CatalogSpec(name="lake", warehouse=str(warehouse)))

    assert listing.complete and listing.unreadable == ()
    found = {
        t.id: (
            t.format,
            {k: v for k, v in t.properties.items() if k in ("delta.appendOnly", "bucket", *OPT_OUT)},
        )
        for t in listing.tables
    }
    assert found == expected
    assert {t.id: t.namespace for t in listing.tables}["lake.sales.eu.orders"] == "sales.eu"
    assert listing.present == set(expected)


def test_what_cannot_be_read_is_said(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    (warehouse / "ops" / "broken" / "_delta_log").mkdir(parents=True)  # a log with no commit yet
    (warehouse / "bad-name" / "t" / "_delta_log").mkdir(parents=True)
    listing = list_catalog(CatalogSpec(name="lake", warehouse=str(warehouse)))
    assert listing.tables == ()
    by_where = {u.where.removeprefix(str(warehouse) + "/"): u for u in listing.unreadable}
    assert by_where["ops/broken"].table_id == "lake.ops.broken"  # found: present, its state unknown
    assert "properties not read" in by_where["ops/broken"].reason
    assert by_where["bad-name/t"].table_id is None and "cannot hold" in by_where["bad-name/t"].reason
    assert listing.present == {"lake.ops.broken"}

    gone = list_catalog(CatalogSpec(name="lake", warehouse=str(tmp_path / "nowhere")))
    assert not gone.complete and "nowhere" in gone.failures[0]
