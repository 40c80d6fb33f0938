"""The services both fronts (CLI, REST) call, against a real SQLite store file: what register changes,
what it never changes, and which inputs are refused before anything is written."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt import services
from airflow_tablemgmt.core.errors import (
    CatalogNotFound,
    InvalidDeclaration,
    TableManagedByCode,
    TableNotFound,
    UnknownAction,
)
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.services import CatalogConflict, InvalidInput, RegisterRequest
from airflow_tablemgmt.store import CatalogManagedByCode, Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse="/data/wh"), Owner.STORE)
    yield s
    s.dispose()


def register(store: Store, **kw: object) -> services.RegisterResult:
    return services.register_table(store, RegisterRequest(**kw))  # type: ignore[arg-type]


def actions_of(store: Store, table_id: str) -> dict:
    return dict(store.tables.get(table_id).actions)


def test_update_changes_only_the_given_fields_and_actions(store: Store) -> None:
    first = register(
        store,
        table="lake.s.t",
        actions=("rewrite-files",),
        options={"expire-snapshots": {"retain-last": 3}},
        owner="alice",
    )
    assert (first.outcome, first.removed_actions) == ("created", [])

    assert register(store, table="lake.s.t", owner="bob").outcome == "updated"
    spec = store.tables.get("lake.s.t")
    assert spec.owner == "bob"
    assert actions_of(store, "lake.s.t") == {"rewrite-files": {}, "expire-snapshots": {"retain-last": 3}}

    register(store, table="lake.s.t", options={"expire-snapshots": {"older-than": "7d"}})
    assert actions_of(store, "lake.s.t")["expire-snapshots"] == {"retain-last": 3, "older-than": "7d"}
    assert register(store, table="lake.s.t", owner="bob").outcome == "unchanged"


def test_a_spec_document_is_merged_the_same_way(store: Store) -> None:
    register(store, table="lake.s.t", actions=("rewrite-files", "compute-stats"))
    doc = {
        "catalog": "lake",
        "namespace": "s",
        "name": "t",
        "queue": "maint",
        "actions": {"compute-stats": None},
    }
    register(store, spec=doc)
    assert store.tables.get("lake.s.t").queue == "maint"
    assert set(actions_of(store, "lake.s.t")) == {"rewrite-files", "compute-stats"}


def test_replacing_the_action_set_is_explicit_and_reports_what_it_removes(store: Store) -> None:
    register(
        store, table="lake.s.t", actions=("rewrite-files", "compute-stats", "expire-snapshots"), owner="o"
    )
    result = register(store, table="lake.s.t", actions=("expire-snapshots",), replace_actions=True)
    assert result.removed_actions == ["compute-stats", "rewrite-files"]
    assert actions_of(store, "lake.s.t") == {"expire-snapshots": {}}
    assert store.tables.get("lake.s.t").owner == "o"  # the other fields stay


def test_disable_and_reenable_one_action(store: Store) -> None:
    register(store, table="lake.s.t", actions=("rewrite-files", "compute-stats"))
    register(store, table="lake.s.t", options={"compute-stats": {"enabled": False}})
    assert store.tables.get("lake.s.t").enabled_actions() == ["rewrite-files"]
    register(store, table="lake.s.t", actions=("compute-stats",))
    assert set(store.tables.get("lake.s.t").enabled_actions()) == {"rewrite-files", "compute-stats"}


def test_register_never_changes_an_existing_catalog(store: Store) -> None:
    register(store, table="lake.s.a", warehouse="/data/wh")  # same settings: accepted
    with pytest.raises(
        CatalogConflict, match="tablemgmt catalog set lake --type hadoop --warehouse /elsewhere"
    ):
        register(store, table="lake.s.b", warehouse="/elsewhere")
    services.set_catalog(store, services.build_catalog("r", type="rest", properties={"uri": "http://c"}))
    with pytest.raises(CatalogConflict, match="catalog r already exists with type rest"):
        register(store, table="r.s.b", catalog_type="hadoop", warehouse="/data/wh")
    assert store.catalogs.get("lake").warehouse == "/data/wh"
    with pytest.raises(TableNotFound):
        store.tables.get("lake.s.b")  # nothing written

    created = register(store, table="fresh.s.t", warehouse="/data/fresh", actions=("rewrite-files",))
    assert created.catalog_created and store.catalogs.get("fresh").warehouse == "/data/fresh"


@pytest.mark.parametrize("warehouse", ["../../tmp", "wh", "./data"])
def test_relative_warehouses_are_refused_by_register_and_catalog_set(store: Store, warehouse: str) -> None:
    with pytest.raises(InvalidDeclaration, match=f"warehouse: .*'{warehouse}'.*absolute"):
        register(store, table="other.s.t", warehouse=warehouse)
    with pytest.raises(InvalidDeclaration, match="absolute"):
        services.build_catalog("other", warehouse=warehouse)
    with pytest.raises(CatalogNotFound):
        store.catalogs.get("other")


def test_unknown_catalog_and_code_owned_table_are_refused_before_writing(store: Store) -> None:
    with pytest.raises(CatalogNotFound, match="registered catalogs: lake"):
        register(store, table="nocat.s.t", actions=("rewrite-files",))
    store.catalogs.upsert(CatalogSpec(name="code", warehouse="/code/wh"), Owner.CODE)
    store.tables.upsert(TableSpec(catalog="code", namespace="s", name="t", owner="yaml"), Owner.CODE)
    with pytest.raises(TableManagedByCode):
        register(store, table="code.s.t", owner="bob")
    assert store.tables.get("code.s.t").owner == "yaml"
    with pytest.raises(CatalogManagedByCode, match="managed by dags/tables.yaml"):
        services.set_catalog(store, services.build_catalog("code", warehouse="/x"))


def test_catalog_set_outcomes_and_secret_properties(store: Store) -> None:
    spec = services.build_catalog("r", type="rest", properties={"uri": "http://c", "token": "conn:rest"})
    assert services.set_catalog(store, spec).outcome == "created"
    assert services.set_catalog(store, spec).outcome == "unchanged"
    assert services.set_catalog(store, services.build_catalog("lake", warehouse="/new")).outcome == "updated"
    views = {v.name: v for v in services.list_catalogs(store)}
    assert views["r"].properties == {"uri": "http://c", "token": "***"}
    with pytest.raises(InvalidInput, match=r"properties\.token") as e:
        services.build_catalog("r", type="rest", properties={"token": "plain-secret"})
    assert "plain-secret" not in str(e.value)


def test_process_filters_naming_unknown_tables_or_actions_are_errors(store: Store) -> None:
    register(store, table="lake.s.t", actions=("rewrite-files",))
    store.processes.open("lake.s.t", "rewrite-files", datetime(2026, 1, 1, tzinfo=UTC))
    assert len(services.list_processes(store, table="lake.s.t", action="rewrite-files")) == 1
    with pytest.raises(TableNotFound, match="did you mean lake.s.t"):
        services.list_processes(store, table="lake.s.tt")
    with pytest.raises(UnknownAction, match="known actions"):
        services.list_processes(store, action="no-such-action")
    services.remove_table(store, "lake.s.t")
    assert len(services.list_processes(store, table="lake.s.t")) == 1  # history outlives removal


def test_cancel_and_clear(store: Store) -> None:
    register(store, table="lake.s.t", actions=("rewrite-files",))
    p, _ = store.processes.open("lake.s.t", "rewrite-files", datetime(2026, 1, 1, tzinfo=UTC))
    q, _ = store.processes.open("lake.s.t", "rewrite-files", datetime(2026, 1, 2, tzinfo=UTC))
    result = services.cancel_process(store, p.id, source="the REST API")
    assert result.accepted and result.status == "CANCELED"
    assert store.processes.get(p.id).failure_reason == "canceled from the REST API"
    cleared = services.clear_table(store, "lake.s.t")
    assert [(r.process_id, r.status) for r in cleared] == [(q.id, "CANCELED")]
    assert store.processes.get(q.id).status == ProcessStatus.CANCELED


def test_argument_parsers_name_the_argument_and_the_rule(tmp_path: Path) -> None:
    assert services.parse_instant("2026-02-01T00:00:00+00:00") == datetime(2026, 2, 1, tzinfo=UTC)
    with pytest.raises(InvalidInput, match="--instant: '2026-02-01' has no time zone"):
        services.parse_instant("2026-02-01")  # the REST API's rule (core.instants)
    with pytest.raises(InvalidInput, match="--instant: 'notadate' is not an ISO 8601 time"):
        services.parse_instant("notadate")
    with pytest.raises(InvalidInput, match="scheduleTime: 'x'"):
        services.parse_instant("x", field="scheduleTime")
    assert services.parse_sets(["a.b=3", "a.c=x y"]) == {"a": {"b": 3, "c": "x y"}}
    with pytest.raises(InvalidInput, match="ACTION.OPTION=VALUE"):
        services.parse_sets(["a=3"])
    with pytest.raises(InvalidInput, match="not a process status; allowed: pending"):
        services.parse_status("done")

    with pytest.raises(InvalidInput, match="no such file"):
        services.load_spec_file(tmp_path / "missing.yaml")
    with pytest.raises(InvalidInput, match="is a directory"):
        services.load_spec_file(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("catalog: [\n")
    with pytest.raises(InvalidInput, match=r"is not valid YAML at line \d+"):
        services.load_spec_file(bad)
    bad.write_text("- a\n- b\n")
    with pytest.raises(InvalidInput, match="must hold one table spec"):
        services.load_spec_file(bad)
    with pytest.raises(InvalidDeclaration, match="must be catalog.namespace.table"):
        services.register_table(None, RegisterRequest(table="a.b"))  # type: ignore[arg-type]
