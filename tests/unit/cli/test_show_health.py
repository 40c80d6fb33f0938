"""``tablemgmt show`` prints the table's health score and its findings: the REST API's and the
metrics' definition (``metadata/health.py`` on ``metadata/files.py``'s figures), on a real Iceberg
table (a SQL catalog on SQLite written by pyiceberg, no JVM)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from airflow_tablemgmt.cli import main
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.metadata.files import read_file_stats
from airflow_tablemgmt.metadata.health import score
from airflow_tablemgmt.store import Store


def test_show_prints_the_score_and_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64())])
    t = cat.create_table("db.t", schema=schema)
    for i in range(4):  # four tiny files: the rewrite-files target makes them one
        t.append(pa.table({"id": list(range(i * 20_000, (i + 1) * 20_000))}, schema=schema))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    catalog = CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri})
    store.catalogs.upsert(catalog, Owner.STORE)
    spec = TableSpec(
        catalog="lake",
        namespace="db",
        name="t",
        actions={"rewrite-files": {"target-file-size-bytes": 1 << 20, "min-input-files": 2}},
    )
    store.tables.upsert(spec, Owner.STORE)
    store.dispose()
    expected = score(read_file_stats(catalog, spec))
    assert expected.findings  # the fixture is meant to need a compaction

    assert main(["--store-url", url, "show", "lake.db.t", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["health"] == expected.to_dict()

    assert main(["--store-url", url, "show", "lake.db.t"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == f"# health {expected.score}/100: an action would help"
    for f in expected.findings:
        assert f"#   -{f.points} {f.action}: {f.reason}" in text
    assert yaml.safe_load(text)["health"]["score"] == expected.score  # still one YAML document
