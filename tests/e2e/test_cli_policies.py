"""``tablemgmt policies`` and ``tablemgmt explain`` end to end: the real console script on a real SQLite store,
policies declared in a real tables.yaml (``tablemgmt apply``) and applied from a file, over a real catalog the
test creates (pyiceberg's SQL catalog in a SQLite file). ``explain`` shows the precedence for a table with its own
declaration and several matching policies, and the opt-out read from a table's properties. No JVM."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from tests.e2e.conftest import BIN, run

pytestmark = pytest.mark.e2e

SCHEMA = pa.schema([("id", pa.int64())])


def test_policies_through_the_cli_and_explain_shows_every_source(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    db, warehouse = tmp_path / "catalog.db", tmp_path / "warehouse"
    warehouse.mkdir()
    client = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    for ns in [("sales",), ("sales", "eu")]:
        client.create_namespace(ns)
    client.create_table(("sales", "eu", "orders"), schema=SCHEMA)
    client.create_table(("sales", "private"), schema=SCHEMA, properties={"tablemgmt.maintenance": "disabled"})
    tables_yaml = tmp_path / "tables.yaml"
    tables_yaml.write_text(
        f"""
catalogs:
  - {{name: lake, type: jdbc, warehouse: 'file://{warehouse}', properties: {{uri: 'jdbc:sqlite:{db}'}}}}
tables:
  - catalog: lake
    namespace: sales.eu
    name: orders
    actions: {{expire-snapshots: {{older-than: 7d}}}}
policies:
  - name: lake-all
    match: {{catalog: lake, format: iceberg}}
    actions:
      expire-snapshots: {{older-than: 5d, retain-last: 5, retries: 3}}
      rewrite-manifests: {{}}
  - name: sales
    match: {{catalog: lake, namespace: 'sales.*', format: iceberg}}
    actions: {{expire-snapshots: {{retain-last: 10}}}}
"""
    )
    url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"

    def tablemgmt(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        res = run([str(BIN / "tablemgmt"), "--store-url", url, *args], timeout=120)
        if ok:
            assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
        return res

    assert "policies: lake-all created, sales created" in tablemgmt("apply", str(tables_yaml)).stdout

    listed = {p["name"]: p for p in json.loads(tablemgmt("policies", "list", "--json").stdout)}
    assert set(listed) == {"lake-all", "sales"}
    assert listed["sales"]["managed-by"] == "code" and listed["sales"]["source"] == str(tables_yaml)
    person = tablemgmt("policies", "list").stdout
    assert "lake-all" in person and "catalog=lake format=iceberg" in person

    def explained() -> dict:
        return json.loads(tablemgmt("explain", "lake.sales.eu.orders", "--json").stdout)

    doc = explained()
    es = doc["actions"]["expire-snapshots"]
    assert es["older-than"] == {"value": "7d", "source": "table"}
    assert es["retain-last"] == {"value": 10, "source": "policy:sales"}
    assert es["retries"] == {"value": 3, "source": "policy:lake-all"}
    assert es["retry-delay"] == {"value": "5m", "source": "default"}
    assert doc["actions"]["rewrite-manifests"]["enabled"] == {"value": True, "source": "policy:lake-all"}
    assert [p["name"] for p in doc["policies"]] == ["sales", "lake-all"]
    assert doc["managed-by"] == "code" and doc["opted-out"] is None and doc["error"] is None
    # a declared table runs its declaration with the policies merged in: what explain shows is what runs
    assert doc["applied"] is True and doc["notes"] == []

    # a policy applied from a file, more specific than both (it names the table): it wins retain-last
    extra = tmp_path / "orders.yaml"
    extra.write_text(
        "name: orders\nmatch: {name: orders, format: iceberg}\nactions: {expire-snapshots: {retain-last: 20}}\n"
    )
    assert tablemgmt("policies", "apply", "-f", str(extra)).stdout.strip() == "policy orders: created"
    doc = explained()
    assert doc["actions"]["expire-snapshots"]["retain-last"] == {"value": 20, "source": "policy:orders"}
    assert doc["actions"]["expire-snapshots"]["older-than"]["source"] == "table"  # the table still wins
    person = tablemgmt("explain", "lake.sales.eu.orders").stdout
    assert re.search(r"\nexpire-snapshots +retain-last +20 +policy:orders", person), person
    assert "policy orders: applies (specificity (2, 0, 0, 0, 1))" in person
    assert (
        "retry-delay" not in person
        and "retry-delay" in tablemgmt("explain", "lake.sales.eu.orders", "--all").stdout
    )

    shown = json.loads(tablemgmt("policies", "show", "orders", "-o", "json").stdout)
    assert shown["managed-by"] == "store" and shown["actions"] == {"expire-snapshots": {"retain-last": 20}}

    # the file's policy is the file's: the CLI may not delete it; its own may go
    refused = tablemgmt("policies", "delete", "lake-all", ok=False)
    assert refused.returncode != 0 and f"policy lake-all is declared in {tables_yaml}" in refused.stderr
    tablemgmt("policies", "delete", "orders")
    missing = tablemgmt("policies", "show", "orders", ok=False)
    assert (
        missing.returncode != 0
        and "policy 'orders' does not exist; policies: lake-all, sales" in missing.stderr
    )

    # a bad policy is refused naming the field, the value and what is allowed; nothing is written
    extra.write_text("- {name: ok}\n- {name: bad, match: {format: orc}}\n")
    bad = tablemgmt("policies", "apply", "-f", str(extra), ok=False)
    assert (
        bad.returncode != 0
        and "[1]: match.format (policy bad): 'orc' is not a known table format" in bad.stderr
    )
    assert "ok" not in {p["name"] for p in json.loads(tablemgmt("policies", "list", "--json").stdout)}

    # a table not registered, opted out by its property (read from the catalog): no policy applies
    doc = json.loads(tablemgmt("explain", "lake.sales.private", "--format", "iceberg", "--json").stdout)
    assert doc["opted-out"] == "its table property tablemgmt.maintenance=disabled"
    assert doc["actions"] == {} and doc["properties"]["tablemgmt.maintenance"] == "disabled"
    client.engine.dispose()
