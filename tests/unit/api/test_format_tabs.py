"""``GET /tables/{id}/details|files|snapshots`` through the real API app for every format: a Delta log and a
Hudi timeline written as files (no JVM) in a hadoop catalog, each read by the views its format declared
(``factories.api.declare_views``); a format without a view answers 422 naming the table, its format and the
formats that have one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store


def _delta(root: Path) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    lines = [
        {"commitInfo": {"operation": "WRITE", "timestamp": 1_764_000_000_000}},
        {
            "metaData": {
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {"k": "v"},
            }
        },
        {"add": {"path": "a.parquet", "size": 100, "dataChange": True, "stats": '{"numRecords": 3}'}},
    ]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in lines))
    lines = [
        {"commitInfo": {"operation": "DELETE", "timestamp": 1_764_000_060_000}},
        {"remove": {"path": "a.parquet", "dataChange": True, "size": 100}},
        {"add": {"path": "b.parquet", "size": 90, "dataChange": True, "stats": '{"numRecords": 2}'}},
    ]
    (log / f"{1:020d}.json").write_text("\n".join(json.dumps(x) for x in lines))


def _hudi(root: Path) -> None:
    timeline = root / ".hoodie" / "timeline"
    timeline.mkdir(parents=True)
    (root / ".hoodie" / "hoodie.properties").write_text(
        "hoodie.table.type=COPY_ON_WRITE\nhoodie.table.name=e\n"
    )
    (timeline / "20261125100000000_20261125100001000.commit").write_text("")
    (timeline / "20261125100100000_20261125100101000.clean").write_text("")
    (root / "f1-0_0-1-1_20261125100000000.parquet").write_bytes(b"x" * 64)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[TestClient]:
    from airflow.api_fastapi.core_api.security import get_user

    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store

    warehouse = tmp_path / "wh"
    _delta(warehouse / "sales" / "orders")
    _hudi(warehouse / "app" / "events")
    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(CatalogSpec(name="paths", type="hadoop", warehouse=str(warehouse)), Owner.STORE)
    for ns, name, fmt in (("sales", "orders", "delta"), ("app", "events", "hudi")):
        store.tables.upsert(
            TableSpec(catalog="paths", namespace=ns, name=name, format=fmt, owner="t"), Owner.STORE
        )
    app = create_api_app()
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[get_user] = lambda: object()
    yield TestClient(app)
    store.dispose()


def test_a_delta_tables_three_tabs(api: TestClient) -> None:
    d = api.get("/tables/paths.sales.orders/details").json()
    assert d["table"] == "paths.sales.orders" and d["owner"] == "t" and d["catalog"]["type"] == "hadoop"
    assert [c["name"] for c in d["columns"]] == ["id"] and d["properties"] == {"k": "v"}
    assert d["figures"]["version"] == 1 and d["current_snapshot_id"] == "1"
    f = api.get("/tables/paths.sales.orders/files").json()
    assert f["files"] == [
        {"path": "b.parquet", "partition": "", "size_bytes": 90, "records": 2, "delete": False}
    ]
    assert f["totals"]["data_files"] == 1 and f["totals"]["records"] == 2
    s = api.get("/tables/paths.sales.orders/snapshots").json()
    assert [(x["snapshot_id"], x["operation"]) for x in s["snapshots"]] == [("0", "WRITE"), ("1", "DELETE")]
    assert s["snapshots"][1]["removed_records"] is None and s["snapshots"][1]["added_records"] == 2


def test_a_hudi_tables_three_tabs(api: TestClient) -> None:
    d = api.get("/tables/paths.app.events/details").json()
    assert d["figures"]["table_type"] == "COPY_ON_WRITE" and d["properties"]["hoodie.table.name"] == "e"
    assert d["columns"] is None  # no create schema recorded
    f = api.get("/tables/paths.app.events/files").json()
    assert f["totals"]["data_files"] == 1 and f["totals"]["data_bytes"] == 64
    s = api.get("/tables/paths.app.events/snapshots").json()
    assert [x["operation"] for x in s["snapshots"]] == ["commit", "clean"]
    assert s["current_snapshot_id"] == "20261125100100000"


def test_a_format_without_the_view_is_422_naming_table_format_and_who_has_it(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from airflow_tablemgmt.core.formats import FORMATS

    hudi = FORMATS.get("hudi")
    views = {tab: ref for tab, ref in hudi.views.items() if tab != "snapshots"}
    monkeypatch.setitem(FORMATS._formats, "hudi", replace(hudi, views=views))
    r = api.get("/tables/paths.app.events/snapshots")
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["field"] == "format"
    assert "paths.app.events" in body["detail"] and "hudi table" in body["detail"]
    assert (
        "formats with one: " in body["detail"] and "delta" in body["detail"] and "iceberg" in body["detail"]
    )
    assert api.get("/tables/paths.app.events/files").status_code == 200


def test_an_unreadable_table_is_502_naming_where(api: TestClient, tmp_path: Path) -> None:
    import shutil

    shutil.rmtree(tmp_path / "wh" / "sales" / "orders" / "_delta_log")
    r = api.get("/tables/paths.sales.orders/snapshots")
    assert r.status_code == 502 and "sales/orders" in r.json()["detail"]


ROOT = Path(__file__).resolve().parents[3]
GENERIC = (
    "airflow_tablemgmt/services/tables.py",
    "airflow_tablemgmt/api/tables.py",
    "airflow_tablemgmt/factories/views.py",
    "airflow_tablemgmt/metadata/format_views.py",
    "airflow_tablemgmt/ui/app.js",
)


@pytest.mark.parametrize("path", GENERIC)
def test_the_views_generic_modules_never_name_a_format(path: str) -> None:
    import re

    text = (ROOT / path).read_text()
    assert not re.findall(r"\b(?:iceberg|hudi|delta|paimon)\b", text, flags=re.IGNORECASE)


def test_the_built_in_formats_declare_their_views_in_their_descriptors() -> None:
    from airflow_tablemgmt.factories.views import format_view
    from airflow_tablemgmt.formats import api
    from airflow_tablemgmt.metadata.format_views import TABS

    for fmt in ("iceberg", "delta", "hudi"):
        assert all(format_view(fmt, tab) is not None for tab in TABS), fmt
    assert {"Format", "LiveFile", "files_view", "details_view"} <= set(api.__all__)
