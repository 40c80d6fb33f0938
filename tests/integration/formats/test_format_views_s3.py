"""The Delta and Hudi table views (the table page's Details, Files and Snapshots tabs) on S3: the tables of
tests/integration/formats/test_path_formats_s3.py (a Delta log with a Parquet checkpoint, a Hudi 1.x timeline
with base and log files), laid out on local disk and copied to SeaweedFS, read through the catalog's
``spark.hadoop.fs.s3a.*`` properties (secrets as ``env:`` references, resolved as the REST API resolves them).
No JVM: CI runs it (≈ 10 s, most of it SeaweedFS's start).

Proves: each view reads the same on S3 as on local disk (the location aside); the REST API serves them for
a table on S3; a wrong secret is an error naming the table, never the secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.formats.delta import views as delta_views
from airflow_tablemgmt.formats.hudi import views as hudi_views
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from tests.integration.formats.test_path_formats_s3 import (  # noqa: F401 - the fixtures
    CANARY,
    SECRET_ENV,
    _secrets,
    catalog,
    resolved,
    tables,
)
from tests.support.servers import SeaweedS3

pytestmark = pytest.mark.integration

DELTA = TableSpec(catalog="lake", namespace="sales", name="orders", format="delta")
HUDI = TableSpec(catalog="lake", namespace="app", name="events", format="hudi")


def _without_location(view: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in view.items() if k != "location"}


@pytest.mark.parametrize(
    ("module", "table"), [(delta_views, DELTA), (hudi_views, HUDI)], ids=["delta", "hudi"]
)
def test_each_view_reads_the_same_on_s3_as_on_local_disk(
    s3: SeaweedS3,  # noqa: F811
    tables: dict[str, Any],  # noqa: F811
    module: Any,
    table: TableSpec,
) -> None:
    remote = resolved(s3, tables)
    local = CatalogSpec(name="lake", type="hadoop", warehouse=str(tables["local"]))
    for tab, hook in module.VIEWS.items():
        on_s3, on_disk = hook(remote, table), hook(local, table)
        assert _without_location(on_s3) == _without_location(on_disk), tab
    files = delta_views.read_files(remote, DELTA)
    assert {f["path"] for f in files["files"]} == {"part=0/opt-0.parquet", "part=1/opt-1.parquet"}
    versions = delta_views.read_snapshots(remote, DELTA)["snapshots"]
    assert [v["operation"] for v in versions] == ["WRITE", "WRITE", "OPTIMIZE"]
    instants = hudi_views.read_snapshots(remote, HUDI)["snapshots"]
    assert [i["operation"] for i in instants].count("compaction") == 1
    groups = hudi_views.read_files(remote, HUDI)
    assert groups["totals"]["data_files"] == 2 and groups["totals"]["delete_files"] == 4


def test_the_rest_api_serves_the_views_of_tables_on_s3(
    s3: SeaweedS3,  # noqa: F811
    tables: dict[str, Any],  # noqa: F811
    tmp_path: Path,
) -> None:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store
    from airflow_tablemgmt.store import Store

    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    try:
        declared = catalog(tables["s3"], s3.endpoint)  # secrets as env: references
        # a hadoop catalog on S3 is refused unless one writer commits (the Delta/Hudi tables' own logs do)
        properties = {**declared.properties, "allow-unsafe-commits": "true"}
        store.catalogs.upsert(declared.model_copy(update={"properties": properties}), Owner.STORE)
        store.tables.upsert(DELTA, Owner.STORE)
        store.tables.upsert(HUDI, Owner.STORE)
        app = create_api_app()
        app.dependency_overrides[get_store] = lambda: store
        app.dependency_overrides[get_user] = lambda: object()
        api = TestClient(app)
        for tab in ("details", "files", "snapshots"):
            for table in (DELTA, HUDI):
                r = api.get(f"/tables/{table.id}/{tab}")
                assert r.status_code == 200, (table.id, tab, r.text)
        d = api.get(f"/tables/{DELTA.id}/details").json()
        assert d["location"] == f"{tables['s3']}/sales/orders" and d["figures"]["version"] == 2
    finally:
        store.dispose()


def test_a_wrong_secret_names_the_table_never_the_secret(
    s3: SeaweedS3,  # noqa: F811
    tables: dict[str, Any],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec

    monkeypatch.setenv(SECRET_ENV, CANARY)
    wrong = resolve_catalog_spec(catalog(tables["s3"], s3.endpoint))
    for module, table in ((delta_views, DELTA), (hudi_views, HUDI)):
        for tab, hook in module.VIEWS.items():
            with pytest.raises(HealthUnavailable) as e:
                hook(wrong, table)
            assert table.id in str(e.value) and CANARY not in str(e.value), (table.id, tab, str(e.value))
