"""The table page's Details, Files and Snapshots tabs in a real browser for the formats beside Iceberg: a
Delta log, a Hudi timeline and (when the plugin is installed) a Paimon table laid out as files (no JVM), the
tablemgmt API and page served by uvicorn (no Airflow around it: the page's requests are same-origin), each
tab rendering what its format's declared view answers. ~15 s; needs chromium (as tests/e2e/test_ui_browser.py,
whose fixtures it uses)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store
from tests.e2e.test_ui_browser import chromium, driver  # noqa: F401 - the browser fixtures
from tests.unit.api.test_format_tabs import _delta, _hudi

pytestmark = pytest.mark.e2e


def _paimon(warehouse: Path) -> bool:
    try:
        import tablemgmt_paimon.factory  # noqa: F401
    except ImportError:
        return False
    root = warehouse / "sales.db" / "items"
    (root / "snapshot").mkdir(parents=True)
    (root / "schema").mkdir()
    schema = {
        "id": 0,
        "fields": [{"id": 0, "name": "id", "type": "BIGINT NOT NULL"}],
        "partitionKeys": [],
        "primaryKeys": [],
        "options": {"bucket": "-1"},
    }
    (root / "schema" / "schema-0").write_text(json.dumps(schema))
    for i, kind in enumerate(("APPEND", "COMPACT"), start=1):
        doc = {
            "id": i,
            "schemaId": 0,
            "commitKind": kind,
            "timeMillis": 1_764_000_000_000 + i,
            "totalRecordCount": 7,
        }
        (root / "snapshot" / f"snapshot-{i}").write_text(json.dumps(doc))
    (root / "bucket-0").mkdir()
    (root / "bucket-0" / "data-0.parquet").write_bytes(b"x" * 300)
    return True


@pytest.fixture
def page(tmp_path: Path) -> Iterator[tuple[str, bool]]:
    import uvicorn
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import FastAPI

    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store
    from airflow_tablemgmt.api.ui import router as ui_router

    warehouse = tmp_path / "wh"
    _delta(warehouse / "sales" / "orders")
    _hudi(warehouse / "app" / "events")
    paimon = _paimon(warehouse)
    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(CatalogSpec(name="paths", type="hadoop", warehouse=str(warehouse)), Owner.STORE)
    tables = [("sales", "orders", "delta"), ("app", "events", "hudi")] + (
        [("sales", "items", "paimon")] if paimon else []
    )
    for ns, name, fmt in tables:
        store.tables.upsert(TableSpec(catalog="paths", namespace=ns, name=name, format=fmt), Owner.STORE)
    api = create_api_app()
    api.dependency_overrides[get_store] = lambda: store
    api.dependency_overrides[get_user] = lambda: object()
    app = FastAPI()
    app.include_router(ui_router)
    app.mount("/v1", api)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}/ui/", paimon
    finally:
        server.should_exit = True
        thread.join(10)
        store.dispose()


def _tab(drv: Any, base: str, table: str, tab: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    drv.get(f"{base}#/tables/{table}?tab={tab}")
    return WebDriverWait(drv, 30).until(
        lambda d: (
            d.find_element(By.ID, f"tab-{tab}")
            if d.find_elements(By.CSS_SELECTOR, f"#tabs a.active[data-tab={tab}]")
            else None
        )
    )


def _texts(drv: Any, css: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [
        e.get_attribute("textContent") for e in drv.find_elements(By.CSS_SELECTOR, css)
    ]  # as written, not as styled


@pytest.mark.timeout(180)
def test_each_formats_tabs_render_its_declared_view(page: tuple[str, bool], driver: Any) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    base, paimon = page
    drv = driver

    # Delta: the schema from the log, the format's figures, its files with records, the log's versions.
    _tab(drv, base, "paths.sales.orders", "details")
    assert drv.find_element(By.ID, "format-badge").get_attribute("data-format") == "delta"
    assert [
        r.get_attribute("data-column") for r in drv.find_elements(By.CSS_SELECTOR, "#schema tbody tr")
    ] == ["id"]
    assert drv.find_element(By.CSS_SELECTOR, '#view-figures tr[data-figure="version"] td').text == "1"
    assert drv.find_element(By.CSS_SELECTOR, '#properties tr[data-property="k"] td').text == "v"
    assert not drv.find_elements(By.CSS_SELECTOR, "[data-meta-error]")
    _tab(drv, base, "paths.sales.orders", "files")
    rows = drv.find_elements(By.CSS_SELECTOR, "#file-list tbody tr")
    assert [r.get_attribute("data-path") for r in rows] == ["b.parquet"]
    assert rows[0].find_elements(By.TAG_NAME, "td")[3].text == "2"  # records, from the add's stats
    assert "what optimize rewrites" in drv.find_element(By.ID, "tab-files").text
    _tab(drv, base, "paths.sales.orders", "snapshots")
    timeline = drv.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")
    assert [(r.get_attribute("data-snapshot"), r.get_attribute("data-operation")) for r in timeline] == [
        ("1", "DELETE"),
        ("0", "WRITE"),
    ]
    heads = _texts(drv, "#timeline thead th")
    assert "Data files +/−" in heads and "Delete files +/−" not in heads  # Delta records no delete files
    assert "Timeline (2 log versions, newest first)" in drv.find_element(By.ID, "tab-snapshots").text

    # Hudi: hoodie.properties, the file group's base file, the completed instants (no file counts recorded).
    _tab(drv, base, "paths.app.events", "details")
    assert "records no schema" in drv.find_element(By.ID, "schema").text
    assert (
        drv.find_element(By.CSS_SELECTOR, '#view-figures tr[data-figure="table_type"] td').text
        == "COPY_ON_WRITE"
    )
    _tab(drv, base, "paths.app.events", "files")
    assert [
        r.get_attribute("data-path") for r in drv.find_elements(By.CSS_SELECTOR, "#file-list tbody tr")
    ] == ["f1-0_0-1-1_20261125100000000.parquet"]
    _tab(drv, base, "paths.app.events", "snapshots")
    ops = [
        r.get_attribute("data-operation") for r in drv.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")
    ]
    assert ops == ["clean", "commit"]
    assert _texts(drv, "#timeline thead th") == ["Committed", "Id", "Operation"]

    if paimon:  # a plugin's format: its views through the same tabs
        _tab(drv, base, "paths.sales.items", "snapshots")
        ops = [
            r.get_attribute("data-operation")
            for r in drv.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")
        ]
        assert ops == ["COMPACT", "APPEND"] and "Total records" in _texts(drv, "#timeline thead th")
