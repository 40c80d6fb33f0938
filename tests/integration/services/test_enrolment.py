"""Discovery against a real catalog the test creates: pyiceberg's SQL catalog (a SQLite file) holding tables
pyiceberg wrote in two namespaces, one of them of two levels (``sales.eu``), a table opted out by its
property and one declared by hand. ``services/enrolment.py`` enrols the right tables under the right policy,
enrols a table created afterwards on the next pass, retires a dropped one with its process history kept and
re-enrols it when it comes back, never enrols the opt-out, never takes a declared table over, and retires
nothing from a catalog it could not list. No JVM."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.policies import Policy, parse_policy
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.services.enrolment import discover, enrolment_records
from airflow_tablemgmt.store import Store

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("id", pa.int64()), ("kind", pa.string())])
OPT_OUT = {"tablemgmt.maintenance": "disabled"}


def _write(client: Any, ident: tuple[str, ...], properties: dict[str, str] | None = None) -> None:
    table = client.create_table(ident, schema=SCHEMA, properties=properties or {})
    table.append(pa.table({"id": [1, 2, 3], "kind": ["a", "b", "c"]}, schema=SCHEMA))


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[tuple[Any, CatalogSpec]]:
    from pyiceberg.catalog.sql import SqlCatalog

    db, warehouse = tmp_path / "catalog.db", tmp_path / "warehouse"
    warehouse.mkdir()
    client = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    for ns in [("sales",), ("sales", "eu"), ("ops",)]:
        client.create_namespace(ns)
    _write(client, ("sales", "orders"))
    _write(client, ("sales", "eu", "orders"))
    _write(client, ("ops", "events"))
    _write(client, ("ops", "private"), OPT_OUT)
    spec = CatalogSpec(
        name="lake", type="jdbc", warehouse=f"file://{warehouse}", properties={"uri": f"jdbc:sqlite:{db}"}
    )
    yield client, spec
    client.engine.dispose()


@pytest.fixture
def store(tmp_path: Path, lake: tuple[Any, CatalogSpec]) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    s.catalogs.upsert(lake[1], Owner.STORE)
    yield s
    s.dispose()


POLICIES: list[Policy] = [
    parse_policy(
        {
            "name": "fleet",
            "match": {"catalog": "lake", "format": "iceberg"},
            "actions": {"expire-snapshots": {"retain-last": 3}},
        }
    ),
    parse_policy(
        {
            "name": "eu",
            "match": {"catalog": "lake", "namespace": "sales.eu", "format": "iceberg"},
            "actions": {"rewrite-files": {"min-input-files": 2}},
        }
    ),
]


def _pass(store: Store, **kw: Any) -> dict[str, list[tuple[str, str]]]:
    result = discover(store, policies=kw.pop("policies", POLICIES), **kw)
    out: dict[str, list[tuple[str, str]]] = {}
    for c in result.changes:
        out.setdefault(c.change, []).append((c.table, c.policy))
    return {k: sorted(v) for k, v in out.items()}


def _managed(store: Store) -> dict[str, str | None]:
    return {r.spec.id: r.policy for r in store.tables.list() if r.managed_by == Owner.POLICY}


def test_discovery_enrols_retires_and_reenrols(store: Store, lake: tuple[Any, CatalogSpec]) -> None:
    client, _ = lake
    store.tables.upsert(TableSpec(catalog="lake", namespace="ops", name="events", actions={}), Owner.STORE)

    first = discover(store, policies=POLICIES)
    assert sorted((c.table, c.policy, c.change) for c in first.changes) == [
        ("lake.sales.eu.orders", "eu", "enrolled"),
        ("lake.sales.orders", "fleet", "enrolled"),
    ]
    skipped = dict(first.skipped)
    assert "tablemgmt.maintenance=disabled" in skipped["lake.ops.private"]
    assert "declaration wins" in skipped["lake.ops.events"]
    assert first.catalogs[0].complete and first.catalogs[0].tables == 4
    assert _managed(store) == {"lake.sales.eu.orders": "eu", "lake.sales.orders": "fleet"}
    assert store.tables.get_registered("lake.ops.events").managed_by == Owner.STORE
    # the most specific policy manages it; every matching policy's actions apply, key by key
    eu = store.tables.get("lake.sales.eu.orders")
    assert eu.enabled_actions() == ["expire-snapshots", "rewrite-files"]
    assert eu.action_settings("rewrite-files").options()["min-input-files"] == 2
    assert eu.action_settings("expire-snapshots").options()["retain-last"] == 3
    assert store.tables.get("lake.sales.orders").enabled_actions() == ["expire-snapshots"]

    assert _pass(store) == {}  # nothing changed: nothing written

    _write(client, ("sales", "returns"))  # created afterwards: enrolled by the next pass
    assert _pass(store) == {"enrolled": [("lake.sales.returns", "fleet")]}

    proc, _ = store.processes.open("lake.sales.orders", "expire-snapshots", datetime(2026, 1, 1, tzinfo=UTC))
    client.drop_table(("sales", "orders"))
    assert _pass(store) == {"retired": [("lake.sales.orders", "fleet")]}
    assert "lake.sales.orders" not in _managed(store)
    assert store.processes.get(proc.id).table_id == "lake.sales.orders"  # history kept
    assert [p.id for p in store.processes.list(table_id="lake.sales.orders")] == [proc.id]

    _write(client, ("sales", "orders"))
    assert _pass(store) == {"re-enrolled": [("lake.sales.orders", "fleet")]}

    with client.load_table(("sales", "returns")).transaction() as tx:
        tx.set_properties(OPT_OUT)
    assert _pass(store) == {"retired": [("lake.sales.returns", "fleet")]}
    assert _pass(store) == {}  # the opt-out is never enrolled again

    records = enrolment_records(store, table="lake.sales.orders")
    assert [r.change for r in records] == ["re-enrolled", "retired", "enrolled"]
    assert records[1].reason == "dropped from catalog lake (not in its listing)"
    assert records[0].policy == "fleet" and "back in catalog lake" in records[0].reason
    opted = enrolment_records(store, table="lake.sales.returns", change="retired")
    assert opted[0].reason == "opted out: its table property tablemgmt.maintenance=disabled"


def test_policy_changes_update_and_a_tie_changes_nothing(store: Store) -> None:
    discover(store, policies=POLICIES)
    fleet9 = parse_policy(
        {
            "name": "fleet",
            "match": {"catalog": "lake", "format": "iceberg"},
            "actions": {"expire-snapshots": {"retain-last": 9}},
        }
    )
    assert _pass(store, policies=[fleet9, POLICIES[1]]) == {
        "updated": [
            ("lake.ops.events", "fleet"),
            ("lake.sales.eu.orders", "eu"),
            ("lake.sales.orders", "fleet"),
        ]
    }
    assert (
        store.tables.get("lake.sales.orders").action_settings("expire-snapshots").options()["retain-last"]
        == 9
    )
    twin = parse_policy(
        {
            "name": "twin",
            "match": {"catalog": "lake", "format": "iceberg"},
            "actions": {"expire-snapshots": {}},
        }
    )
    result = discover(store, policies=[fleet9, POLICIES[1], twin])
    assert result.changes == []
    assert all("'fleet' and 'twin'" in why for _, why in result.skipped if why.startswith("table "))
    assert len([t for t, why in result.skipped if "same specificity" in why]) == 3


def test_dry_run_writes_nothing(store: Store, lake: tuple[Any, CatalogSpec]) -> None:
    result = discover(store, policies=POLICIES, dry_run=True)
    assert sorted(c.table for c in result.changes) == [
        "lake.ops.events",
        "lake.sales.eu.orders",
        "lake.sales.orders",
    ]
    assert result.dry_run and _managed(store) == {} and enrolment_records(store) == []


def test_an_unlisted_catalog_retires_nothing(store: Store, lake: tuple[Any, CatalogSpec]) -> None:
    discover(store, policies=POLICIES)
    lake[0].drop_table(("sales", "orders"))

    def unreachable(catalog: CatalogSpec) -> CatalogSpec:
        raise RuntimeError("connection conn:lake_db does not resolve here")

    result = discover(store, policies=POLICIES, resolve_catalog=unreachable)
    assert result.changes == [] and not result.catalogs[0].complete
    assert "does not resolve here" in result.catalogs[0].failures[0]
    assert "lake.sales.orders" in _managed(store)


def test_one_policy_and_an_unknown_one(store: Store) -> None:
    result = discover(store, policies=POLICIES, policy="eu")
    assert [(c.table, c.change) for c in result.changes] == [("lake.sales.eu.orders", "enrolled")]
    from airflow_tablemgmt.services.errors import NotFound

    with pytest.raises(NotFound, match="'nope' is not a policy; policies: eu, fleet"):
        discover(store, policies=POLICIES, policy="nope")
    elsewhere = parse_policy({"name": "elsewhere", "match": {"catalog": "warehouse_*"}})
    result = discover(store, policies=[*POLICIES, elsewhere], policy="elsewhere")
    assert result.changes == [] and result.catalogs == []
    assert result.notes == [
        "policy elsewhere names no registered catalog (match.catalog: warehouse_*; registered: lake)"
    ]


def test_a_path_based_table_is_enrolled_with_its_formats_actions(tmp_path: Path) -> None:
    """A Delta table in a hadoop catalog's warehouse (its ``_delta_log`` as Delta lays it out), found by the
    walk, enrolled by a policy for Delta tables with Delta's own actions; the Iceberg policy leaves it alone."""
    from tests.integration.metadata.test_discovery import _delta

    warehouse = tmp_path / "paths"
    _delta(warehouse / "ops" / "events", {})
    _delta(warehouse / "ops" / "private", dict(OPT_OUT))
    s = Store(f"sqlite:///{tmp_path / 'paths.db'}")
    s.catalogs.upsert(CatalogSpec(name="paths", warehouse=str(warehouse)), Owner.STORE)
    deltas = parse_policy(
        {"name": "deltas", "match": {"catalog": "paths", "format": "delta"}, "actions": {"optimize": {}}}
    )
    result = discover(s, policies=[deltas, *POLICIES])
    assert [(c.table, c.policy, c.change) for c in result.changes] == [
        ("paths.ops.events", "deltas", "enrolled")
    ]
    spec = s.tables.get("paths.ops.events")
    assert spec.format == "delta" and spec.enabled_actions() == ["optimize"]
    assert "opted out" in dict(result.skipped)["paths.ops.private"]
    s.dispose()


def test_registering_an_enrolled_table_takes_it_over_with_only_its_own_settings(store: Store) -> None:
    from airflow_tablemgmt.services.tables import RegisterRequest, register_table

    discover(store, policies=POLICIES)
    assert store.tables.get("lake.sales.eu.orders").enabled_actions() == ["expire-snapshots", "rewrite-files"]
    result = register_table(store, RegisterRequest(table="lake.sales.eu.orders", actions=["compute-stats"]))
    assert result.outcome == "updated"
    reg = store.tables.get_registered("lake.sales.eu.orders")
    assert (reg.managed_by, reg.policy) == (Owner.STORE, None)
    assert reg.spec.enabled_actions() == ["compute-stats"]  # none of the policies' settings became its own
    assert _pass(store) == {}  # its declaration wins from now on


def test_a_policy_that_cannot_be_read_retires_nothing(store: Store) -> None:
    """A stored policy whose row no longer validates (an older version wrote it) is not 'gone': its tables
    stay as they are, and the pass says why."""
    from sqlalchemy import update

    from airflow_tablemgmt.store.models import PolicyRow
    from airflow_tablemgmt.store.policies import PolicyRepository

    repo = PolicyRepository.of(store)
    for p in POLICIES:
        repo.upsert(p, Owner.STORE)
    discover(store)  # the store's policies
    assert _managed(store) == {
        "lake.ops.events": "fleet",
        "lake.sales.eu.orders": "eu",
        "lake.sales.orders": "fleet",
    }
    with store.engine.begin() as conn:
        table = PolicyRow.__table__
        conn.execute(
            update(table).where(table.c.name == "fleet").values(spec={"name": "fleet", "retired-key": 1})
        )
    result = discover(store)
    assert result.changes == []
    assert "policy fleet cannot be read (see the log): its tables are left as they are" in result.notes
    skipped = dict(result.skipped)
    assert skipped["lake.sales.orders"] == "its policy fleet cannot be read: left as it is"
    assert skipped["lake.sales.eu.orders"] == "settings kept while policy fleet cannot be read"
    assert _managed(store)["lake.sales.orders"] == "fleet"
    with store.engine.begin() as conn:  # the eu policy is removed: its table is not retired either, yet
        conn.execute(PolicyRow.__table__.delete().where(PolicyRow.__table__.c.name == "eu"))
    result = discover(store)
    assert (
        result.changes == []
        and "not retired while policy fleet cannot be read" in dict(result.skipped)["lake.sales.eu.orders"]
    )
