"""The per-format table views (metadata/delta_views.py, metadata/hudi_views.py, metadata/format_views.py) on
a ``_delta_log`` and a ``.hoodie`` timeline laid out as Delta and Hudi write them, files on disk, no JVM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.formats.delta import views as delta_views
from airflow_tablemgmt.formats.hudi import views as hudi_views
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.format_views import (
    SIZE_BUCKETS,
    LiveFile,
    files_view,
)

MIB = 1024 * 1024
SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {"comment": "the key"}},
        {"name": "part", "type": "integer", "nullable": True, "metadata": {}},
    ],
}


def catalog(tmp_path: Path) -> CatalogSpec:
    return CatalogSpec(name="lake", type="hadoop", warehouse=str(tmp_path / "wh"))


def commit(log: Path, version: int, *actions: dict) -> None:
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def info(operation: str, ts: int) -> dict:
    return {"commitInfo": {"operation": operation, "timestamp": ts}}


def add(path: str, size: int, records: int | None, data_change: bool = True) -> dict:
    a: dict = {"path": path, "size": size, "dataChange": data_change, "partitionValues": {}}
    if records is not None:
        a["stats"] = json.dumps({"numRecords": records})
    return {"add": a}


def remove(path: str, size: int) -> dict:
    return {"remove": {"path": path, "dataChange": False, "size": size}}


@pytest.fixture
def delta(tmp_path: Path) -> TableSpec:
    log = tmp_path / "wh" / "sales" / "orders" / "_delta_log"
    meta = {
        "metaData": {
            "schemaString": json.dumps(SCHEMA),
            "partitionColumns": ["part"],
            "configuration": {"delta.targetFileSize": str(8 * MIB)},
        }
    }
    protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    commit(
        log,
        0,
        info("WRITE", 1_764_000_000_000),
        protocol,
        meta,
        add("part=0/a.parquet", MIB, 10),
        add("part=1/b.parquet", 2 * MIB, 20),
    )
    commit(log, 1, info("WRITE", 1_764_000_060_000), add("part=0/c.parquet", 3 * MIB, 5))
    commit(
        log,
        2,
        info("OPTIMIZE", 1_764_000_120_000),
        remove("part=0/a.parquet", MIB),
        remove("part=0/c.parquet", 3 * MIB),
        add("part=0/ac.parquet", 4 * MIB, 15, data_change=False),
    )
    commit(log, 3, info("WRITE", 1_764_000_180_000), add("part=1/d.parquet", 7 * MIB, None))
    return TableSpec(catalog="lake", namespace="sales", name="orders", format="delta")


def test_delta_details_read_the_schema_protocol_and_figures(tmp_path: Path, delta: TableSpec) -> None:
    d = delta_views.read_details(catalog(tmp_path), delta)
    assert d["location"].endswith("/wh/sales/orders") and d["current_snapshot_id"] == "3"
    assert [(c["name"], c["type"], c["required"], c["doc"]) for c in d["columns"]] == [
        ("id", "long", True, "the key"),
        ("part", "integer", False, None),
    ]
    assert d["partition_spec"]["fields"] == [{"name": "part", "source": "part", "transform": "identity"}]
    assert d["format_version"] == "1/2 (reader/writer)" and d["properties"]["delta.targetFileSize"] == str(
        8 * MIB
    )
    assert d["last_updated"] == "2025-11-24T16:03:00+00:00"
    assert d["figures"] == {
        "version": 3,
        "data_files": 3,
        "total_bytes": 13 * MIB,
        "log_commits": 4,
        "commits_since_optimize": 1,
        "last_optimize_version": 2,
    }


def test_delta_files_are_the_live_files_with_their_records(tmp_path: Path, delta: TableSpec) -> None:
    f = delta_views.read_files(catalog(tmp_path), delta)
    assert f["target_file_size_bytes"] == 8 * MIB and f["snapshot_id"] == "3" and f["files_total"] == 3
    parts = {p["partition"]: p for p in f["partitions"]}
    assert (parts["part=1"]["data_files"], parts["part=1"]["data_bytes"]) == (2, 9 * MIB)
    assert parts["part=1"]["records"] is None  # d.parquet's add has no stats
    assert parts["part=0"]["records"] == 15 and f["totals"]["records"] is None
    # 1 MiB and 2 MiB... against 8 MiB: 4 MiB is under 0.75 (small), 7 MiB is not
    assert f["totals"]["small_files"] == 2 and sum(f["totals"]["histogram"]) == 3
    assert {x["path"]: x["records"] for x in f["files"]} == {
        "part=0/ac.parquet": 15,
        "part=1/b.parquet": 20,
        "part=1/d.parquet": None,
    }


def test_delta_snapshots_are_the_log_versions(tmp_path: Path, delta: TableSpec) -> None:
    s = delta_views.read_snapshots(catalog(tmp_path), delta)
    assert s["current_snapshot_id"] == "3" and s["entry_label"] == "log versions"
    rows = s["snapshots"]
    assert [(r["snapshot_id"], r["operation"], r["current"]) for r in rows] == [
        ("0", "WRITE", False),
        ("1", "WRITE", False),
        ("2", "OPTIMIZE", False),
        ("3", "WRITE", True),
    ]
    assert rows[2]["added_data_files"] == 1 and rows[2]["removed_data_files"] == 2
    assert rows[2]["added_bytes"] == 4 * MIB and rows[2]["removed_bytes"] == 4 * MIB
    assert rows[0]["added_records"] == 30 and rows[3]["added_records"] is None
    assert rows[1]["committed_at"] == "2025-11-24T16:01:00+00:00" and rows[1]["parent_id"] == "0"


def test_a_directory_without_a_delta_log_is_unavailable_naming_it(tmp_path: Path) -> None:
    table = TableSpec(catalog="lake", namespace="sales", name="none", format="delta")
    for read in (delta_views.read_details, delta_views.read_files, delta_views.read_snapshots):
        with pytest.raises(HealthUnavailable, match="sales/none"):
            read(catalog(tmp_path), table)


HUDI_SCHEMA = {
    "type": "record",
    "name": "r",
    "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": ["string", "null"]}],
}


@pytest.fixture
def hudi(tmp_path: Path) -> TableSpec:
    root = tmp_path / "wh" / "app" / "events"
    timeline = root / ".hoodie" / "timeline"
    timeline.mkdir(parents=True)
    schema = json.dumps(HUDI_SCHEMA).replace(":", "\\:")  # as java.util.Properties writes it
    (root / ".hoodie" / "hoodie.properties").write_text(
        "#Properties saved\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version=8\n"
        f"hoodie.table.partition.fields=part\nhoodie.table.timeline.timezone=UTC\nhoodie.table.create.schema={schema}\n"
        f"hoodie.parquet.max.file.size={4 * MIB}\n"
    )
    for name in [
        "20261125100000000_20261125100001000.deltacommit",
        "20261125100100000_20261125100101000.deltacommit",
        "20261125100200000.compaction.requested",
        "20261125100200000_20261125100201000.commit",
        "20261125100300000_20261125100301000.deltacommit",
        "20261125100400000.deltacommit.requested",
        "20261125100400000.deltacommit.inflight",
    ]:
        (timeline / name).write_text("")
    p0 = root / "0"
    p0.mkdir()
    files = {
        "g1-0_0-1-1_20261125100000000.parquet": MIB,  # the first slice of g1: replaced by the compaction
        "g1-0_0-2-2_20261125100200000.parquet": 3 * MIB,  # the compaction's base file
        ".g1-0_20261125100100000.log.1_0-1-1": 100,  # written on the first slice
        ".g1-0_20261125100300000.log.1_0-3-3": 200,  # written after the compaction
        ".g1-0_20261125100400000.log.1_0-4-4": 300,  # its instant is still inflight
        "g2-0_0-1-2_20261125100000000.parquet": 2 * MIB,
    }
    for name, size in files.items():
        (p0 / name).write_bytes(b"x" * size)
    (p0 / ".hoodie_partition_metadata").write_text("")
    return TableSpec(catalog="lake", namespace="app", name="events", format="hudi")


def test_hudi_details_read_hoodie_properties_and_the_create_schema(tmp_path: Path, hudi: TableSpec) -> None:
    d = hudi_views.read_details(catalog(tmp_path), hudi)
    assert [(c["name"], c["type"], c["required"]) for c in d["columns"]] == [
        ("id", "long", True),
        ("v", "string", False),
    ]
    assert d["format_version"] == "8" and d["current_snapshot_id"] == "20261125100300000"
    assert d["last_updated"] == "2026-11-25T10:03:00+00:00"
    assert d["partition_spec"]["fields"][0]["source"] == "part"
    assert d["properties"]["hoodie.table.create.schema"] == json.dumps(HUDI_SCHEMA)
    assert d["figures"]["table_type"] == "MERGE_ON_READ" and d["figures"]["file_groups"] == 2


def test_hudi_files_are_each_file_groups_latest_slice(tmp_path: Path, hudi: TableSpec) -> None:
    f = hudi_views.read_files(catalog(tmp_path), hudi)
    assert sorted(x["path"] for x in f["files"]) == [
        "0/.g1-0_20261125100300000.log.1_0-3-3",
        "0/g1-0_0-2-2_20261125100200000.parquet",
        "0/g2-0_0-1-2_20261125100000000.parquet",
    ]
    (p,) = f["partitions"]
    assert (p["partition"], p["data_files"], p["data_bytes"], p["delete_files"], p["delete_bytes"]) == (
        "0",
        2,
        5 * MIB,
        1,
        200,
    )
    assert f["target_file_size_bytes"] == 4 * MIB and p["records"] is None
    assert p["small_files"] == 1  # 2 MiB < 0.75 x 4 MiB; 3 MiB is not


def test_hudi_snapshots_are_the_completed_instants(tmp_path: Path, hudi: TableSpec) -> None:
    s = hudi_views.read_snapshots(catalog(tmp_path), hudi)
    assert [(r["snapshot_id"], r["operation"], r["current"]) for r in s["snapshots"]] == [
        ("20261125100000000", "deltacommit", False),
        ("20261125100100000", "deltacommit", False),
        ("20261125100200000", "compaction", False),
        ("20261125100300000", "deltacommit", True),
    ]
    assert (
        s["snapshots"][2]["action"] == "commit"
        and s["snapshots"][0]["committed_at"] == "2026-11-25T10:00:00+00:00"
    )
    assert s["pending"] == [
        {"snapshot_id": "20261125100400000", "operation": "deltacommit", "state": "inflight"}
    ]


def test_files_view_buckets_against_the_target_and_keeps_unknown_records_null() -> None:
    target = 100
    files = [
        LiveFile("a", "p=1", 10, 1),
        LiveFile("b", "p=1", 80, 2),
        LiveFile("c", "p=2", 200, None),
        LiveFile("d", "p=2", 5, None, delete=True),
    ]
    v = files_view(files, target, snapshot_id=7)
    assert v["buckets"] == [round(b * target) for b in SIZE_BUCKETS] and v["snapshot_id"] == "7"
    assert v["totals"]["histogram"] == [1, 0, 0, 0, 1, 0, 1] and v["totals"]["small_files"] == 1
    p1, p2 = v["partitions"]
    assert (p1["partition"], p1["records"], p2["records"], p2["delete_files"]) == ("p=1", 3, None, 1)


def test_a_format_declaring_an_unknown_view_is_refused_and_who_has_one_is_listed() -> None:
    from airflow_tablemgmt.core.factory import FormatSession
    from airflow_tablemgmt.core.formats import FORMATS, Format
    from airflow_tablemgmt.factories.views import format_view, formats_with_view

    session = FormatSession("x.Extensions", None, (), module="fmt_y.job")
    with pytest.raises(ValueError, match="unknown view"):
        Format("fmt-x", (), {}, session, "fmt_x:F", views={"timeline": "fmt_x:read"})
    FORMATS.declare(Format("fmt-y", (), {}, session, "fmt_y:F", views={"files": "json:dumps"}))
    try:
        assert format_view("fmt-y", "files") is not None and format_view("fmt-y", "details") is None
        assert "fmt-y" in formats_with_view("files") and "fmt-y" not in formats_with_view("details")
    finally:
        FORMATS.forget("fmt-y")
