"""``tablemgmt discover`` and ``tablemgmt enrolments`` end to end: the real console script on a real SQLite
store holding a policy, over a real catalog the test creates (pyiceberg's SQL catalog in a SQLite file) with
tables in ``sales`` and the two-level ``sales.eu`` and one opted out by its property. No JVM."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.policies import PolicyRepository
from tests.e2e.conftest import BIN, run

pytestmark = pytest.mark.e2e

SCHEMA = pa.schema([("id", pa.int64())])


def _write(client: Any, ident: tuple[str, ...], properties: dict[str, str] | None = None) -> None:
    client.create_table(ident, schema=SCHEMA, properties=properties or {}).append(
        pa.table({"id": [1]}, schema=SCHEMA)
    )


def test_discover_enrols_then_lists_and_records(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    db, warehouse = tmp_path / "catalog.db", tmp_path / "warehouse"
    warehouse.mkdir()
    client = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    for ns in [("sales",), ("sales", "eu")]:
        client.create_namespace(ns)
    _write(client, ("sales", "orders"))
    _write(client, ("sales", "eu", "orders"))
    _write(client, ("sales", "private"), {"tablemgmt.maintenance": "disabled"})
    url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
    store = Store(url)
    store.catalogs.upsert(
        CatalogSpec(
            name="lake", type="jdbc", warehouse=f"file://{warehouse}", properties={"uri": f"jdbc:sqlite:{db}"}
        ),
        Owner.STORE,
    )
    policy = {
        "name": "fleet",
        "match": {"catalog": "lake", "format": "iceberg"},
        "actions": {"expire-snapshots": {}},
    }
    PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)
    store.dispose()

    def tablemgmt(*args: str) -> subprocess.CompletedProcess[str]:
        res = run([str(BIN / "tablemgmt"), "--store-url", url, *args], timeout=120)
        assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
        return res

    dry = json.loads(tablemgmt("discover", "--dry-run", "--json").stdout)
    assert dry["dry_run"] and dry["counts"]["enrolled"] == 2
    assert json.loads(tablemgmt("tables", "--json").stdout) == []  # a dry run wrote nothing

    person = tablemgmt("discover").stdout
    assert "lake.sales.eu.orders" in person and "enrolled" in person and "2 enrolled" in person
    assert "left alone: lake.sales.private: opted out" in person

    listed = {t["table"]: t for t in json.loads(tablemgmt("tables", "--json").stdout)}
    assert set(listed) == {"lake.sales.orders", "lake.sales.eu.orders"}
    assert listed["lake.sales.eu.orders"]["policy"] == "fleet"
    assert listed["lake.sales.eu.orders"]["managed_by"] == "policy"
    assert "policy fleet" in tablemgmt("tables").stdout  # the MANAGED BY column
    shown = json.loads(tablemgmt("show", "lake.sales.orders", "--json").stdout)
    assert shown["policy"] == "fleet" and "expire-snapshots" in shown["actions"]

    removal = run([str(BIN / "tablemgmt"), "--store-url", url, "remove", "lake.sales.orders"], timeout=120)
    assert removal.returncode != 0 and "managed by policy fleet" in removal.stderr

    client.drop_table(("sales", "orders"))
    again = json.loads(tablemgmt("discover", "--policy", "fleet", "--json").stdout)
    assert [(c["table"], c["change"]) for c in again["changes"]] == [("lake.sales.orders", "retired")]
    records = json.loads(tablemgmt("enrolments", "--json").stdout)
    assert [(r["table_id"], r["change"]) for r in records][:1] == [("lake.sales.orders", "retired")]
    assert {r["table_id"] for r in records if r["change"] == "enrolled"} == {
        "lake.sales.orders",
        "lake.sales.eu.orders",
    }
    client.engine.dispose()
