"""``tablemgmt show`` on a table whose deletes are v2 delete files and v3 deletion vectors: the kinds apart,
in the text (a ``# deletes:`` line) and the document (``health.deletes``). The health read is the services'
own, handed figures as a v3 table's manifests give them (tests/unit/metadata/test_deletes.py reads those)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.cli import main
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.services import health as health_service
from airflow_tablemgmt.store import Store

FIGURES: dict[str, Any] = dict(
    snapshot_id=7,
    snapshots=4,
    data_files=2,
    small_data_files=0,
    small_file_threshold_bytes=1,
    delete_files=3,
    data_bytes=2299,
    delete_bytes=1320,
    records=200,
    compacted_data_files=2,
    deleted_rows=44,
    position_delete_files=1,
    deletion_vectors=2,
    dv_deleted_rows=43,
    dv_bytes=87,
    dv_files=2,
    format_version=3,
)


def test_show_prints_delete_files_and_deletion_vectors_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    store.tables.upsert(TableSpec(catalog="lake", namespace="db", name="t"), Owner.STORE)
    store.dispose()
    real = health_service.table_health

    def table_health(store: Store, table_id: str, **kw: Any) -> health_service.TableHealth:
        fresh = health_service._Cache(time.monotonic)  # noqa: SLF001 - no other test's reading answers
        return real(store, table_id, cache=fresh, read=lambda catalog, table: FileStats(**FIGURES))

    monkeypatch.setattr(health_service, "table_health", table_health)

    assert main(["--store-url", url, "show", "lake.db.t"]) == 0
    text = capsys.readouterr().out
    assert "# deletes: 1 position delete file and 2 deletion vectors mark 44 of 200 rows deleted " in text
    assert "(43 by deletion vectors)" in text

    assert main(["--store-url", url, "show", "lake.db.t", "--json"]) == 0
    deletes = json.loads(capsys.readouterr().out)["health"]["deletes"]
    assert deletes["position_delete_files"] == 1 and deletes["deletion_vectors"] == 2
    assert (deletes["deleted_rows"], deletes["dv_deleted_rows"], deletes["format_version"]) == (44, 43, 3)
