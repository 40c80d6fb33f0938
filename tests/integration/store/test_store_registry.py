"""Catalog and table registry: upserts, ownership, soft delete, pruning, fingerprint."""

from __future__ import annotations

from datetime import UTC

import pytest

from airflow_tablemgmt.core.errors import CatalogNotFound, TableManagedByCode, TableNotFound
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import CatalogManagedByCode, TableManagedByStore

pytestmark = pytest.mark.integration


def table(name: str = "orders", **overrides: object) -> TableSpec:
    data: dict[str, object] = {
        "catalog": "lake",
        "namespace": "sales",
        "name": name,
        "actions": {"expire-snapshots": {"retain-last": 3}},
    }
    data.update(overrides)
    return TableSpec.model_validate(data)


# -- catalogs ---------------------------------------------------------------------------------


def test_catalog_upsert_reports_whether_anything_changed(store):
    spec = CatalogSpec(name="lake", warehouse="/data/lake")
    assert store.catalogs.upsert(spec, Owner.CODE) is True
    assert store.catalogs.upsert(spec, Owner.CODE) is False
    changed = CatalogSpec(name="lake", warehouse="/data/lake", properties={"io-impl": "x"})
    assert store.catalogs.upsert(changed, Owner.CODE) is True
    assert store.catalogs.get("lake") == changed


def test_catalog_list_and_not_found_names_the_registered_ones(store):
    store.catalogs.upsert(CatalogSpec(name="zeta", type="rest", properties={"uri": "http://x"}), Owner.STORE)
    store.catalogs.upsert(CatalogSpec(name="alpha", warehouse="/a"), Owner.CODE)
    assert [c.name for c in store.catalogs.list()] == ["alpha", "zeta"]
    assert store.catalogs.get("zeta").properties == {"uri": "http://x"}
    with pytest.raises(CatalogNotFound, match=r"'nope' is not registered; registered catalogs: alpha, zeta"):
        store.catalogs.get("nope")


def test_code_owned_catalog_refuses_store_writer(store):
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/a"), Owner.CODE)
    with pytest.raises(CatalogManagedByCode, match="catalog lake is managed by dags/tables.yaml"):
        store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/b"), Owner.STORE)
    assert store.catalogs.get("lake").warehouse == "/a"


# -- tables -----------------------------------------------------------------------------------


def test_table_upsert_created_unchanged_updated(store):
    spec = table()
    assert store.tables.upsert(spec, Owner.STORE) == "created"
    before = store.tables.get_registered(spec.id)

    assert store.tables.upsert(table(), Owner.STORE) == "unchanged"
    assert store.tables.get_registered(spec.id).updated_at == before.updated_at

    changed = table(priority=5, queue="maintenance")
    assert store.tables.upsert(changed, Owner.STORE) == "updated"
    after = store.tables.get_registered(spec.id)
    assert after.spec == changed == store.tables.get(spec.id)
    assert after.managed_by == Owner.STORE
    assert after.created_at == before.created_at
    assert after.updated_at > before.updated_at


def test_registered_table_timestamps_are_aware_utc(store):
    store.tables.upsert(table(), Owner.CODE)
    registered = store.tables.get_registered("lake.sales.orders")
    for value in (registered.created_at, registered.updated_at):
        assert value.tzinfo is UTC


def test_code_owned_table_refuses_store_writer(store):
    store.tables.upsert(table(), Owner.CODE)
    with pytest.raises(TableManagedByCode, match="lake.sales.orders is managed by dags/tables.yaml"):
        store.tables.upsert(table(priority=9), Owner.STORE)
    with pytest.raises(TableManagedByCode):
        store.tables.remove("lake.sales.orders", Owner.STORE)
    assert store.tables.get("lake.sales.orders").priority == 1


def test_code_writer_takes_over_a_store_owned_table(store):
    store.tables.upsert(table(), Owner.STORE)
    with pytest.raises(TableManagedByStore, match="registered through the REST API or the CLI"):
        store.tables.remove("lake.sales.orders", Owner.CODE)
    assert store.tables.upsert(table(), Owner.CODE) == "updated"
    assert store.tables.get_registered("lake.sales.orders").managed_by == Owner.CODE


def test_soft_delete_hides_the_table_and_upsert_revives_it(store):
    store.tables.upsert(table("a"), Owner.STORE)
    store.tables.upsert(table("b"), Owner.STORE)
    store.tables.remove("lake.sales.a", Owner.STORE)

    with pytest.raises(TableNotFound, match=r"lake.sales.a is not registered: it was removed at"):
        store.tables.get("lake.sales.a")
    with pytest.raises(TableNotFound):
        store.tables.remove("lake.sales.a", Owner.STORE)
    assert [t.table_id for t in store.tables.list()] == ["lake.sales.b"]
    listed = store.tables.list(include_deleted=True)
    assert [(t.table_id, t.deleted_at is not None) for t in listed] == [
        ("lake.sales.a", True),
        ("lake.sales.b", False),
    ]

    assert store.tables.upsert(table("a"), Owner.CODE) == "created"
    revived = store.tables.get_registered("lake.sales.a")
    assert revived.deleted_at is None and revived.managed_by == Owner.CODE


def test_missing_table_suggests_close_names(store):
    store.tables.upsert(table("orders"), Owner.STORE)
    with pytest.raises(
        TableNotFound, match=r"lake.sales.order is not registered; did you mean lake.sales.orders\?"
    ):
        store.tables.get("lake.sales.order")
    with pytest.raises(TableNotFound, match=r"1 table\(s\) are registered"):
        store.tables.remove("x.y.z", Owner.STORE)


def test_prune_removes_only_undeclared_code_tables(store):
    for name in ("kept", "dropped1", "dropped2"):
        store.tables.upsert(table(name), Owner.CODE)
    store.tables.upsert(table("from_rest"), Owner.STORE)

    assert store.tables.prune_code_tables({"lake.sales.kept"}) == [
        "lake.sales.dropped1",
        "lake.sales.dropped2",
    ]
    assert [t.table_id for t in store.tables.list()] == ["lake.sales.from_rest", "lake.sales.kept"]
    assert store.tables.prune_code_tables({"lake.sales.kept"}) == []


def test_fingerprint_changes_with_every_write_and_only_then(store):
    empty = store.tables.fingerprint()
    store.tables.upsert(table(), Owner.CODE)
    created = store.tables.fingerprint()
    store.tables.upsert(table(), Owner.CODE)
    assert store.tables.fingerprint() == created != empty
    store.tables.upsert(table(priority=2), Owner.CODE)
    updated = store.tables.fingerprint()
    assert updated != created
    store.tables.prune_code_tables(set())
    assert store.tables.fingerprint() not in (empty, created, updated)


def test_concurrent_upserts_of_one_declaration_create_one_row(backend, race):
    stores = [backend.store() for _ in range(6)]
    stores[0].tables.list()  # schema first, so the race is about the row
    results = race(6, lambda i: stores[i].tables.upsert(table(), Owner.CODE))
    assert sorted(results) == ["created"] + ["unchanged"] * 5
    assert len(stores[0].tables.list(include_deleted=True)) == 1
