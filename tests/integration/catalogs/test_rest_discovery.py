"""Discovery over Iceberg's REST catalog with its warehouse on S3 (Iceberg's reference REST server, SeaweedFS's
S3 gateway, both started here): namespaces listed through the REST protocol recursively (``sales`` and its
child ``sales.eu``), each table loaded for its properties with the catalog's S3 keys given as ``env:``
references and resolved by the pass; tables written by pyiceberg. The pass enrols the two tables a policy
matches, never the opted-out one, and retires a dropped one with its history kept."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType, Owner
from airflow_tablemgmt.services.enrolment import discover
from airflow_tablemgmt.store import Store
from tests.support.catalogs import s3_properties, seed, writer
from tests.support.servers import ACCESS_KEY, SECRET_KEY, IcebergRestServer, SeaweedS3

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory, s3: SeaweedS3) -> Iterator[IcebergRestServer]:
    saved = {k: os.environ.get(k) for k in ("TMS_TEST_S3_KEY_ID", "TMS_TEST_S3_SECRET")}
    os.environ.update(TMS_TEST_S3_KEY_ID=ACCESS_KEY, TMS_TEST_S3_SECRET=SECRET_KEY)
    server = IcebergRestServer(tmp_path_factory.mktemp("rest"), s3).start()
    yield server
    server.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_discovery_over_rest_and_s3(rest: IcebergRestServer, s3: SeaweedS3, tmp_path: Path) -> None:
    catalog = CatalogSpec(
        name="restlake", type=CatalogType.REST, properties={"uri": rest.uri, **s3_properties(s3)}
    )
    seed(catalog, "orders", appends=1, namespace="sales")
    seed(catalog, "orders", appends=1, namespace="sales.eu")
    seed(catalog, "private", appends=1, namespace="sales", properties={"tablemgmt.maintenance": "disabled"})
    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(catalog, Owner.STORE)
    fleet = parse_policy(
        {
            "name": "fleet",
            "match": {"catalog": "restlake", "format": "iceberg"},
            "actions": {"expire-snapshots": {}},
        }
    )

    first = discover(store, policies=[fleet])
    assert first.catalogs[0].complete and first.catalogs[0].tables == 3, first.catalogs
    assert sorted((c.table, c.change) for c in first.changes) == [
        ("restlake.sales.eu.orders", "enrolled"),
        ("restlake.sales.orders", "enrolled"),
    ]
    assert "opted out" in dict(first.skipped)["restlake.sales.private"]

    proc, _ = store.processes.open(
        "restlake.sales.orders", "expire-snapshots", datetime(2026, 1, 1, tzinfo=UTC)
    )
    writer(catalog).drop_table(("sales", "orders"))
    second = discover(store, policies=[fleet])
    assert [(c.table, c.change) for c in second.changes] == [("restlake.sales.orders", "retired")]
    assert store.processes.get(proc.id).table_id == "restlake.sales.orders"
    assert {r.spec.id for r in store.tables.list()} == {"restlake.sales.eu.orders"}
    store.dispose()
