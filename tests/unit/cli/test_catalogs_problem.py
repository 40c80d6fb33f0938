"""``tablemgmt catalogs`` shows a legacy catalog row's problem to a person, not only to ``--json``: a
row written before secrets had to be references (a plaintext ``jdbc.password``) is listed masked, and a
line under the table says it needs migration and which property; a readable catalog gets no such line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import insert

from airflow_tablemgmt.cli import main
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.models import CatalogRow


def test_the_table_output_shows_a_legacy_rows_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    now = datetime.now(UTC)
    with store.engine.begin() as conn:  # a row written before the rules: every write path refuses it now
        conn.execute(
            insert(CatalogRow.__table__).values(
                name="plainsecret",
                type="jdbc",
                warehouse="/tmp/plainsecret",
                properties={"uri": "jdbc:postgresql://pg/cat", "jdbc.password": "S3CRET"},
                owner="store",
                created_at=now,
                updated_at=now,
            )
        )
    store.dispose()

    assert main(["--store-url", url, "catalogs", "--json"]) == 0
    doc = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    problem = doc["plainsecret"]["problem"]
    assert problem.startswith("needs migration:") and "jdbc.password" in problem

    assert main(["--store-url", url, "catalogs"]) == 0
    text = capsys.readouterr().out
    assert "S3CRET" not in text and "jdbc.password=***" in text
    assert f"catalog plainsecret: {problem}" in text.splitlines()
    assert not [line for line in text.splitlines() if line.startswith("catalog lake:")]
