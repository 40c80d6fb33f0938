"""Enrolment by policy in the store (``store/enrolment.py``), on SQLite and PostgreSQL: a table enrolled,
updated, retired with its process history kept, re-enrolled; a declared table never taken over; every change
recorded; a declaration takes an enrolled table over; REST/CLI removal of an enrolled table refused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.enrolment import EnrolmentRepository
from airflow_tablemgmt.store.errors import TableManagedByPolicy

pytestmark = pytest.mark.integration


def _spec(name: str, retain: int = 5) -> TableSpec:
    return TableSpec(
        catalog="lake",
        namespace="sales.eu",
        name=name,
        actions={"expire-snapshots": {"retain-last": retain}},
    )


@pytest.fixture
def repo(store: Store) -> EnrolmentRepository:
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/tmp/w"), Owner.STORE)
    return EnrolmentRepository(store.engine)


def test_enrol_retire_reenrol_keeps_history(store: Store, repo: EnrolmentRepository) -> None:
    assert repo.enrol(_spec("orders"), "fleet", "matches policy fleet") == "enrolled"
    assert repo.enrol(_spec("orders"), "fleet", "again") is None  # unchanged: nothing written
    reg = store.tables.get_registered("lake.sales.eu.orders")
    assert reg.managed_by == Owner.POLICY and reg.policy == "fleet"
    assert reg.spec.actions == {"expire-snapshots": {"retain-last": 5}}

    proc, _ = store.processes.open(
        "lake.sales.eu.orders", "expire-snapshots", datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert repo.enrol(_spec("orders", retain=3), "fleet", "policy changed") == "updated"
    assert repo.retire("lake.sales.eu.orders", "other", "not its policy") is False
    assert repo.retire("lake.sales.eu.orders", "fleet", "dropped from catalog lake") is True
    assert repo.retire("lake.sales.eu.orders", "fleet", "twice") is False
    assert [t.spec.id for t in store.tables.list()] == []
    assert store.processes.get(proc.id).table_id == "lake.sales.eu.orders"  # history kept

    assert repo.enrol(_spec("orders"), "fleet", "back in catalog lake") == "re-enrolled"
    records = repo.records(table_id="lake.sales.eu.orders")
    assert [r.change for r in records] == ["re-enrolled", "retired", "updated", "enrolled"]
    assert records[1].reason == "dropped from catalog lake" and records[1].policy == "fleet"
    assert [r.table_id for r in repo.records(change="retired")] == ["lake.sales.eu.orders"]
    assert repo.counts() == {"fleet": 1}


def test_a_declared_table_is_never_taken_over(store: Store, repo: EnrolmentRepository) -> None:
    store.tables.upsert(_spec("declared", retain=9), Owner.CODE)
    store.tables.upsert(_spec("registered", retain=9), Owner.STORE)
    assert repo.enrol(_spec("declared"), "fleet", "matches") is None
    assert repo.enrol(_spec("registered"), "fleet", "matches") is None
    assert store.tables.get_registered("lake.sales.eu.declared").managed_by == Owner.CODE
    assert store.tables.get("lake.sales.eu.registered").actions == {"expire-snapshots": {"retain-last": 9}}
    assert repo.retire("lake.sales.eu.declared", "fleet", "x") is False
    assert repo.records() == []


def test_a_declaration_takes_an_enrolled_table_over(store: Store, repo: EnrolmentRepository) -> None:
    repo.enrol(_spec("orders"), "fleet", "matches")
    with pytest.raises(TableManagedByPolicy, match="managed by policy fleet"):
        store.tables.remove("lake.sales.eu.orders", Owner.STORE)
    store.tables.upsert(_spec("orders", retain=7), Owner.STORE)
    reg = store.tables.get_registered("lake.sales.eu.orders")
    assert reg.managed_by == Owner.STORE and reg.policy is None
    assert repo.enrol(_spec("orders"), "fleet", "matches") is None  # its declaration wins from now on
    assert [t.table_id for t in repo.managed()] == []


def test_removed_declaration_then_enrolled(store: Store, repo: EnrolmentRepository) -> None:
    store.tables.upsert(_spec("orders", retain=7), Owner.STORE)
    store.tables.remove("lake.sales.eu.orders", Owner.STORE)
    assert repo.enrol(_spec("orders"), "fleet", "matches") == "enrolled"  # was never a policy's
    assert repo.managed("fleet")[0].table_id == "lake.sales.eu.orders"


def test_a_declarations_file_takes_enrolled_tables_over_in_one_batch(
    store: Store, repo: EnrolmentRepository
) -> None:
    repo.enrol(_spec("a"), "fleet", "matches")
    repo.enrol(_spec("b"), "fleet", "matches")
    outcomes = store.tables.upsert_many([_spec("a", retain=7), _spec("b", retain=8)], Owner.CODE)
    assert outcomes == {"lake.sales.eu.a": "updated", "lake.sales.eu.b": "updated"}
    rows = {r.spec.id: r for r in store.tables.list()}
    assert {i: (r.managed_by, r.policy) for i, r in rows.items()} == {
        "lake.sales.eu.a": (Owner.CODE, None),
        "lake.sales.eu.b": (Owner.CODE, None),
    }
    assert repo.managed() == [] and repo.counts() == {}
