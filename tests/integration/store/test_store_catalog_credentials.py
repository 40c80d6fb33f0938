"""Catalog credentials inside URIs and catalog removal, on real SQLite and PostgreSQL stores (issue 22,
item 4): a URI with a credential is never written (the store's own check, beneath every writer), a row
written before that rule still loads and is listed redacted, and a catalog is removed only once no live
table (a dynamic one included) uses it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, select

from airflow_tablemgmt.core.dynamic import DynamicTableSpec
from airflow_tablemgmt.core.errors import CatalogNotFound, InvalidDeclaration
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.services.catalogs import build_catalog, list_catalogs, remove_catalog
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.errors import CatalogInUse, CatalogManagedByCode
from airflow_tablemgmt.store.models import CatalogRow

pytestmark = pytest.mark.integration

LEAKY_URI = "jdbc:postgresql://pg/cat?user=u&password=S3CRET"


def test_the_store_refuses_a_uri_with_a_credential(store: Store) -> None:
    spec = CatalogSpec.model_construct(
        name="leaky", type="jdbc", warehouse="/w", properties={"uri": LEAKY_URI}
    )
    with pytest.raises(InvalidDeclaration, match="properties.uri: the URI holds a credential") as e:
        store.catalogs.upsert(spec, Owner.STORE)
    assert "S3CRET" not in str(e.value)
    with pytest.raises(CatalogNotFound):
        store.catalogs.get("leaky")
    with pytest.raises(InvalidDeclaration, match="warehouse: the URI holds a credential.*conn:"):
        build_catalog("leaky", type="glue", warehouse="s3a://AK:SK@bucket/wh")


def test_a_row_written_earlier_loads_and_is_listed_redacted(store: Store) -> None:
    now = datetime.now(UTC)
    store.catalogs.list()  # the schema exists once the store was used
    with store.engine.begin() as conn:
        conn.execute(
            insert(CatalogRow.__table__).values(
                name="old",
                type="rest",
                warehouse="s3a://AK:SK@bucket/wh",
                properties={"uri": "http://u:pw@rest:8181", "s3.endpoint": LEAKY_URI},
                owner="store",
                created_at=now,
                updated_at=now,
            )
        )
    assert store.catalogs.get("old").properties["uri"] == "http://u:pw@rest:8181"  # jobs still reach it
    (view,) = [v for v in list_catalogs(store) if v.name == "old"]
    shown = repr(view.to_dict())
    for secret in ("pw@", "AK:SK", "S3CRET"):
        assert secret not in shown, shown
    assert view.properties["uri"] == "http://u:***@rest:8181"
    assert view.warehouse == "s3a://AK:***@bucket/wh"


def test_a_catalog_is_removed_only_once_no_table_uses_it(store: Store) -> None:
    store.catalogs.upsert(CatalogSpec(name="gone", warehouse="/data/gone"), Owner.STORE)
    store.tables.upsert(
        TableSpec(catalog="gone", namespace="db", name="t", actions={"rewrite-files": {}}), Owner.STORE
    )
    dynamic = DynamicTableSpec.model_validate(
        {"identifier": "gone.db.dt", "query": "SELECT 1 AS x", "freshness": "1 DAY"}
    )
    store.dynamic.upsert(dynamic, Owner.STORE)
    with pytest.raises(
        CatalogInUse, match=r"catalog gone is used by gone\.db\.dt, gone\.db\.t; remove those"
    ):
        remove_catalog(store, "gone")
    assert store.catalogs.get("gone").warehouse == "/data/gone"
    store.tables.remove("gone.db.t", Owner.STORE)
    with pytest.raises(CatalogInUse, match=r"used by gone\.db\.dt;"):
        remove_catalog(store, "gone")
    store.dynamic.delete("gone.db.dt", Owner.STORE)
    remove_catalog(store, "gone")  # removed tables keep their history, not their catalog
    with pytest.raises(CatalogNotFound):
        store.catalogs.get("gone")
    with store.engine.connect() as conn:
        assert "gone" not in set(conn.execute(select(CatalogRow.__table__.c.name)).scalars())


def test_a_catalog_of_tables_yaml_is_not_removed_by_the_store(store: Store) -> None:
    store.catalogs.upsert(CatalogSpec(name="coded", warehouse="/data/coded"), Owner.CODE)
    with pytest.raises(CatalogManagedByCode):
        remove_catalog(store, "coded")
    with pytest.raises(CatalogNotFound, match="not registered"):
        remove_catalog(store, "never_there")
