"""metadata/table_views.py on a real Iceberg table (a SQL catalog on SQLite, pyiceberg only, no JVM):
the Details, Files and Snapshots tabs' figures equal what pyiceberg reads of the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.formats.iceberg.views import SIZE_BUCKETS, read_details, read_files, read_snapshots

SPEC = TableSpec(
    catalog="lake",
    namespace="sales",
    name="orders",
    actions={"rewrite-files": {"target-file-size-bytes": 2097152}},
)


@pytest.fixture
def lake(tmp_path: Path) -> tuple[CatalogSpec, Any]:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType, StructType

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"file://{tmp_path / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("sales")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "region", StringType(), required=False, doc="sales region"),
        NestedField(
            3, "meta", StructType(NestedField(4, "src", StringType(), required=False)), required=False
        ),
    )
    table = cat.create_table(
        "sales.orders",
        schema=schema,
        partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region")),
        sort_order=SortOrder(SortField(1, IdentityTransform())),
        properties={"write.target-file-size-bytes": "1048576"},
    )
    arrow = table.schema().as_arrow()
    for i, region in enumerate(["eu", "eu", "us"]):  # three appends: eu 2 files, us 1
        rows = 10 * (i + 1)
        table.append(
            pa.table(
                {"id": list(range(rows)), "region": [region] * rows, "meta": [{"src": "x"}] * rows},
                schema=arrow,
            )
        )
    table.delete("id = 0 and region = 'us'")
    catalog = CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri})
    return catalog, cat.load_table("sales.orders")


def test_details_are_the_tables_schema_spec_sort_and_properties(lake: tuple[CatalogSpec, Any]) -> None:
    catalog, table = lake
    d = read_details(catalog, SPEC)
    assert [c["name"] for c in d["columns"]] == ["id", "region", "meta", "meta.src"]
    assert d["columns"][1] == {
        "id": 2,
        "name": "region",
        "type": "string",
        "required": False,
        "doc": "sales region",
    }
    assert d["partition_spec"]["fields"] == [{"name": "region", "source": "region", "transform": "identity"}]
    assert (
        d["sort_order"]["fields"][0]["source"] == "id" and d["sort_order"]["fields"][0]["direction"] == "asc"
    )
    assert d["properties"]["write.target-file-size-bytes"] == "1048576"
    assert d["current_snapshot_id"] == str(table.current_snapshot().snapshot_id)
    assert d["location"] == table.location() and d["format_version"] == table.format_version


def test_files_per_partition_equal_the_file_listing(lake: tuple[CatalogSpec, Any]) -> None:
    catalog, table = lake
    f = read_files(catalog, SPEC)
    listed = table.inspect.files().to_pylist()
    assert f["target_file_size_bytes"] == 2097152  # the rewrite-files action's target, not the property
    per = {p["partition"]: p for p in f["partitions"]}
    assert set(per) == {"region=eu", "region=us"} and f["partitions_total"] == 2
    for region in ("eu", "us"):
        data = [r for r in listed if r["partition"]["region"] == region and r["content"] == 0]
        assert per[f"region={region}"]["data_files"] == len(data)
        assert per[f"region={region}"]["data_bytes"] == sum(r["file_size_in_bytes"] for r in data)
        assert per[f"region={region}"]["records"] == sum(r["record_count"] for r in data)
        assert sum(per[f"region={region}"]["histogram"]) == len(data)
    assert f["totals"]["data_files"] == sum(1 for r in listed if r["content"] == 0)
    assert len(f["buckets"]) == len(SIZE_BUCKETS) and f["buckets"][3] == 1572864  # 75 % of 2 MiB: small below


def test_snapshots_are_the_timeline_with_added_and_removed(lake: tuple[CatalogSpec, Any]) -> None:
    catalog, table = lake
    s = read_snapshots(catalog, SPEC)["snapshots"]
    assert [x["snapshot_id"] for x in s] == [str(x.snapshot_id) for x in table.snapshots()]
    assert [x["operation"] for x in s][:3] == ["append"] * 3 and s[-1]["current"]
    assert [x["added_records"] for x in s][:3] == [10, 20, 30]
    assert (
        s[0]["added_data_files"] == 1
        and s[0]["parent_id"] is None
        and s[1]["parent_id"] == s[0]["snapshot_id"]
    )
    last = s[-1]  # the delete rewrote the us file without its id = 0 row
    assert last["removed_records"] >= 1 and last["total_records"] == 59
