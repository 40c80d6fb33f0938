"""The Paimon plugin's table views (``tablemgmt_paimon/views.py``, named by its descriptor's ``Format.views``)
on a directory laid out as Paimon's filesystem catalog writes it: snapshot and schema files as JSON, data files
under ``<partition>/bucket-<n>/``; and the same views through the REST API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tablemgmt_paimon.views import read_details, read_files, read_snapshots

from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.formats.api import HealthUnavailable

KIB = 1024


def _table(warehouse: Path) -> None:
    root = warehouse / "sales.db" / "orders"
    (root / "snapshot").mkdir(parents=True)
    (root / "schema").mkdir()
    schema = {
        "version": 3,
        "id": 1,
        "fields": [
            {"id": 0, "name": "id", "type": "BIGINT NOT NULL"},
            {"id": 1, "name": "v", "type": "STRING"},
            {"id": 2, "name": "dt", "type": "STRING NOT NULL", "description": "the day"},
        ],
        "partitionKeys": ["dt"],
        "primaryKeys": ["dt", "id"],
        "options": {"bucket": "1", "target-file-size": "4 kb"},
    }
    (root / "schema" / "schema-0").write_text(json.dumps({**schema, "id": 0, "fields": schema["fields"][:1]}))
    (root / "schema" / "schema-1").write_text(json.dumps(schema))
    kinds = [("APPEND", 10), ("APPEND", 5), ("COMPACT", 0), ("APPEND", -3)]
    total = 0
    for i, (kind, delta) in enumerate(kinds, start=1):
        total += delta
        doc = {
            "version": 3,
            "id": i,
            "schemaId": 1,
            "commitKind": kind,
            "timeMillis": 1_764_000_000_000 + i * 60_000,
            "totalRecordCount": total,
            "deltaRecordCount": delta,
        }
        (root / "snapshot" / f"snapshot-{i}").write_text(json.dumps(doc))
    (root / "snapshot" / "LATEST").write_text("4")
    for part, sizes in (("dt=2026-11-25", [1, 2, 8]), ("dt=2026-11-26", [3])):
        bucket = root / part / "bucket-0"
        bucket.mkdir(parents=True)
        for j, size in enumerate(sizes):
            (bucket / f"data-{j}.parquet").write_bytes(b"x" * size * KIB)
        (bucket / ".data-0.parquet.crc").write_bytes(b"c")


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    _table(tmp_path / "wh")
    return tmp_path / "wh"


def _spec() -> TableSpec:
    return TableSpec(catalog="plake", namespace="sales", name="orders", format="paimon")


def _catalog(warehouse: Path) -> CatalogSpec:
    return CatalogSpec(name="plake", type="hadoop", warehouse=str(warehouse))


def test_details_read_the_latest_snapshots_schema(warehouse: Path) -> None:
    d = read_details(_catalog(warehouse), _spec())
    assert [(c["id"], c["name"], c["type"], c["required"], c["doc"]) for c in d["columns"]] == [
        (0, "id", "BIGINT", True, None),
        (1, "v", "STRING", False, None),
        (2, "dt", "STRING", True, "the day"),
    ]
    assert d["schema_id"] == 1 and d["current_snapshot_id"] == "4" and d["format_version"] == 3
    assert d["partition_spec"]["fields"] == [{"name": "dt", "source": "dt", "transform": "identity"}]
    assert d["properties"] == {"bucket": "1", "target-file-size": "4 kb"}
    assert d["last_updated"] == "2025-11-24T16:04:00+00:00"
    assert d["figures"] == {
        "snapshots": 4,
        "latest_snapshot": 4,
        "records": 12,
        "primary_keys": "dt, id",
        "data_files_on_disk": 4,
        "data_bytes_on_disk": 14 * KIB,
        "commits_since_compaction": 1,
    }


def test_files_per_partition_against_the_target_file_size(warehouse: Path) -> None:
    f = read_files(_catalog(warehouse), _spec())
    assert f["target_file_size_bytes"] == 4 * KIB and f["compaction_action"] == "compact"
    assert [(p["partition"], p["data_files"], p["data_bytes"]) for p in f["partitions"]] == [
        ("dt=2026-11-25", 3, 11 * KIB),
        ("dt=2026-11-26", 1, 3 * KIB),
    ]
    # under 0.75 x 4 KiB = 3 KiB: the 1 and 2 KiB files; 3 KiB and 8 KiB are not small
    assert f["totals"]["small_files"] == 2 and f["totals"]["records"] is None
    assert f["files_total"] == 4 and f["files"][0]["path"] == "dt=2026-11-25/bucket-0/data-0.parquet"


def test_snapshots_are_the_snapshot_files(warehouse: Path) -> None:
    s = read_snapshots(_catalog(warehouse), _spec())
    assert s["current_snapshot_id"] == "4"
    assert [
        (x["snapshot_id"], x["operation"], x["total_records"], x["net_records"]) for x in s["snapshots"]
    ] == [
        ("1", "APPEND", 10, 10),
        ("2", "APPEND", 15, 5),
        ("3", "COMPACT", 15, 0),
        ("4", "APPEND", 12, -3),
    ]
    assert s["snapshots"][3]["current"] and s["snapshots"][3]["parent_id"] == "3"


def test_a_table_off_the_local_disk_or_never_written_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(HealthUnavailable, match="not on a local filesystem"):
        read_files(CatalogSpec(name="plake", type="hadoop", warehouse="s3a://bucket/wh"), _spec())
    with pytest.raises(HealthUnavailable, match="no snapshot directory"):
        read_snapshots(_catalog(tmp_path), _spec())


def test_the_rest_api_serves_the_plugins_views(warehouse: Path, tmp_path: Path) -> None:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store
    from airflow_tablemgmt.store import Store

    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    try:
        store.catalogs.upsert(_catalog(warehouse), Owner.STORE)
        store.tables.upsert(_spec(), Owner.STORE)
        app = create_api_app()
        app.dependency_overrides[get_store] = lambda: store
        app.dependency_overrides[get_user] = lambda: object()
        api = TestClient(app)
        d = api.get("/tables/plake.sales.orders/details")
        assert d.status_code == 200, d.text
        assert d.json()["figures"]["records"] == 12 and d.json()["catalog"]["name"] == "plake"
        assert api.get("/tables/plake.sales.orders/files").json()["totals"]["data_files"] == 4
        assert len(api.get("/tables/plake.sales.orders/snapshots").json()["snapshots"]) == 4
    finally:
        store.dispose()
