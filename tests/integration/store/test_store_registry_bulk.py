"""The first sync of a large declarations file writes in bulk: one transaction, batched INSERTs
(executemany), on SQLite and PostgreSQL, with the same outcomes and rules as row-by-row upserts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.dag_file import load_registry_and_build

pytestmark = pytest.mark.integration


def spec(name: str, retain: int = 3) -> TableSpec:
    return TableSpec.model_validate(
        {
            "catalog": "lake",
            "namespace": "bulk",
            "name": name,
            "actions": {"expire-snapshots": {"retain-last": retain}},
        }
    )


@dataclass
class Statements:
    inserts: list[int] = field(default_factory=list)  # rows written by each INSERT statement
    commits: int = 0


@contextmanager
def watched(engine: Any) -> Iterator[Statements]:
    seen = Statements()

    def on_execute(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
    ) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO TMS_TABLE"):
            # executemany: a list of rows; "insertmanyvalues" (multi-row VALUES): one flat tuple.
            columns = statement[statement.index("(") + 1 : statement.index(")")].count(",") + 1
            rows = (
                isinstance(parameters, list) and parameters and isinstance(parameters[0], (tuple, list, dict))
            )
            seen.inserts.append(len(parameters) if rows else max(1, len(parameters) // columns))

    def on_commit(conn: Any) -> None:
        seen.commits += 1

    event.listen(engine, "before_cursor_execute", on_execute)
    event.listen(engine, "commit", on_commit)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", on_execute)
        event.remove(engine, "commit", on_commit)


def test_upsert_many_creates_in_one_transaction_with_batched_inserts(store):
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/data/wh"), Owner.CODE)
    specs = [spec(f"t{i:04d}") for i in range(1200)]
    with watched(store.engine) as seen:
        outcome = store.tables.upsert_many(specs, Owner.CODE)
    assert set(outcome.values()) == {"created"} and len(outcome) == 1200
    assert seen.commits == 1
    assert sum(seen.inserts) == 1200 and len(seen.inserts) <= 3  # batches of 500, not 1,200 statements
    rows = store.tables.list()
    assert len(rows) == 1200 and {r.managed_by for r in rows} == {Owner.CODE}
    assert store.tables.get("lake.bulk.t0042") == specs[42]


def test_upsert_many_has_upserts_outcomes_and_ownership_rules(store):
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/data/wh"), Owner.CODE)
    store.tables.upsert(spec("same"), Owner.CODE)
    store.tables.upsert(spec("changed"), Owner.CODE)
    store.tables.upsert(spec("from_cli"), Owner.STORE)
    store.tables.upsert(spec("removed"), Owner.CODE)
    store.tables.remove("lake.bulk.removed", Owner.CODE)
    outcome = store.tables.upsert_many(
        [spec("same"), spec("changed", 5), spec("from_cli"), spec("removed"), spec("new")], Owner.CODE
    )
    assert outcome == {
        "lake.bulk.same": "unchanged",
        "lake.bulk.changed": "updated",
        "lake.bulk.from_cli": "updated",  # the file takes it over from the store
        "lake.bulk.removed": "created",  # revived
        "lake.bulk.new": "created",
    }
    assert store.tables.get("lake.bulk.changed") == spec("changed", 5)
    assert {r.table_id: r.managed_by for r in store.tables.list()}["lake.bulk.from_cli"] == Owner.CODE


def test_first_sync_of_a_large_file_is_one_transaction(store, tmp_path: Path):
    y = tmp_path / "tables.yaml"
    y.write_text(
        "catalogs: [{name: lake, warehouse: /data/wh}]\ntables:\n"
        + "".join(
            f"  - {{catalog: lake, namespace: bulk, name: t{i:04d}, actions: {{expire-snapshots: {{}}}}}}\n"
            for i in range(600)
        )
    )
    with watched(store.engine) as seen:
        result = load_registry_and_build(y, store=store)
    assert len(result.dags) == 600 and not result.errors
    assert sum(seen.inserts) == 600 and len(seen.inserts) <= 2
    assert len({r.created_at for r in store.tables.list()}) == 1  # one transaction, one instant


def test_a_synced_file_is_taken_from_its_record_on_both_backends(store, tmp_path: Path, monkeypatch):
    from airflow_tablemgmt.declarations import parse as declarations

    y = tmp_path / "tables.yaml"
    y.write_text(
        "catalogs: [{name: lake, warehouse: /data/wh}]\ntables:\n"
        + "".join(
            f"  - {{catalog: lake, namespace: bulk, name: t{i:04d}, actions: {{expire-snapshots: {{}}}}}}\n"
            for i in range(20)
        )
    )
    first = load_registry_and_build(y, store=store)
    loads: list[object] = []
    real = declarations.yaml.load
    monkeypatch.setattr(declarations.yaml, "load", lambda *a, **k: loads.append(a) or real(*a, **k))
    again = load_registry_and_build(y, store=store)
    assert loads == [] and set(again.dags) == set(first.dags) and not again.errors
    one = load_registry_and_build(y, store=store, only_dag_id="tms__lake.bulk.t0007__expire-snapshots")
    assert loads == [] and list(one.dags) == ["tms__lake.bulk.t0007__expire-snapshots"]
