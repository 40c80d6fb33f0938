"""The DAG file's registry read: a broken tables.yaml or stored row is reported, never fatal;
nothing is pruned unless the file is clean and lists its tables."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import text

from airflow_tablemgmt.core.naming import BROKEN_DAG_ID
from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build
from airflow_tablemgmt.store import Store

CATALOG = "catalogs: [{name: lake, warehouse: /data/wh}]\n"
DECLARED = (
    CATALOG + "tables:\n  - {catalog: lake, namespace: s, name: coded, actions: {expire-snapshots: {}}}\n"
)
STORE_DAG = "tms__lake.s.from_cli__expire-snapshots"
CODE_DAG = "tms__lake.s.coded__expire-snapshots"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


def seed(store: Store, tmp_path: Path) -> Path:
    """One code-owned table (applied from a file) and one store-owned table."""
    y = tmp_path / "tables.yaml"
    y.write_text(DECLARED)
    load_registry_and_build(y, store=store)
    spec = TableSpec.model_validate(
        {"catalog": "lake", "namespace": "s", "name": "from_cli", "actions": {"expire-snapshots": {}}}
    )
    store.tables.upsert(spec, Owner.STORE)
    return y


def live(store: Store) -> list[str]:
    return [t.table_id for t in store.tables.list()]


@pytest.mark.parametrize(
    "content",
    [
        None,
        b"",
        b"{}",
        b"null",
        CATALOG.encode(),
        CATALOG.encode() + b"tables: [\n",
        b"\xff\xfe tables: []",
        "dir",
    ],
    ids=["missing", "empty", "braces", "null", "no-tables-key", "yaml-error", "not-utf8", "directory"],
)
def test_broken_or_empty_file_prunes_nothing_and_keeps_store_dags(
    store: Store, tmp_path: Path, content
) -> None:
    y = seed(store, tmp_path)
    y.unlink()
    if content == "dir":
        y.mkdir()
    elif content is not None:
        y.write_bytes(content)
    result = load_registry_and_build(y, store=store)
    assert live(store) == ["lake.s.coded", "lake.s.from_cli"]
    # The store still has both tables, so both keep their DAGs.
    assert {STORE_DAG, CODE_DAG} <= set(result.dags)
    if content in (b"\xff\xfe tables: []", "dir", CATALOG.encode() + b"tables: [\n"):
        assert BROKEN_DAG_ID in result.dags and any(str(y) in e for e in result.errors)


def test_explicit_empty_list_logs_what_it_would_prune_and_keeps_it(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    y = seed(store, tmp_path)
    y.write_text(CATALOG + "tables: []\n")
    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt"):
        result = load_registry_and_build(y, store=store)
    assert live(store) == ["lake.s.coded", "lake.s.from_cli"]
    assert CODE_DAG in result.dags
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("lake.s.coded" in m and "tables: []" in m and "apply --prune" in m for m in warned), warned


def test_a_table_dropped_from_a_clean_file_is_pruned_and_loses_its_dags(store: Store, tmp_path: Path) -> None:
    y = seed(store, tmp_path)
    y.write_text(
        CATALOG + "tables:\n  - {catalog: lake, namespace: s, name: other, actions: {expire-snapshots: {}}}\n"
    )
    result = load_registry_and_build(y, store=store)
    assert live(store) == ["lake.s.from_cli", "lake.s.other"]
    assert CODE_DAG not in result.dags
    assert {STORE_DAG, "tms__lake.s.other__expire-snapshots"} <= set(result.dags)


def test_one_bad_entry_keeps_the_other_tables_and_prunes_nothing(store: Store, tmp_path: Path) -> None:
    y = seed(store, tmp_path)
    y.write_text(
        DECLARED
        + "  - {catalog: lake, namespace: s, name: ttl, actions: {expire-data: {column: c, retention: 99999999999d}}}\n"
        + "  - {catalog: lake, namespace: s, name: x, actions: {expire-snapshots: {older-than: 30}}}\n"
    )
    result = load_registry_and_build(y, store=store)
    assert {STORE_DAG, CODE_DAG} <= set(result.dags)
    assert BROKEN_DAG_ID in result.dags
    assert any("lake.s.ttl" in e and "too large" in e for e in result.errors)
    assert any("lake.s.x" in e and "'30d'" in e for e in result.errors)


def test_unreadable_stored_row_is_reported_by_name_and_the_rest_build(store: Store, tmp_path: Path) -> None:
    y = seed(store, tmp_path)
    bad = '{"catalog": "lake", "namespace": "s", "name": "from_cli", "actions": {"expire-data": {"column": "c", "retention": "-1s"}}}'
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE tms_table SET spec = :s WHERE table_id = 'lake.s.from_cli'"), {"s": bad})
    result = load_registry_and_build(y, store=store)
    assert CODE_DAG in result.dags and STORE_DAG not in result.dags
    assert any("table lake.s.from_cli" in e and "expire-data.retention" in e for e in result.errors)
    # A task of the unreadable table's DAG gets the same message instead of a crash.
    only = load_registry_and_build(y, store=store, only_dag_id=STORE_DAG)
    assert only.dags == {} and any("lake.s.from_cli" in e for e in only.errors)


def test_a_file_catalog_over_another_catalogs_warehouse_gets_no_dags(store: Store, tmp_path: Path) -> None:
    y = seed(store, tmp_path)
    y.write_text(
        DECLARED.replace("tables:", "  - {name: lake2, warehouse: 'file:///data/wh/'}\ntables:").replace(
            "catalogs: [{name: lake, warehouse: /data/wh}]\n",
            "catalogs:\n  - {name: lake, warehouse: /data/wh}\n",
        )
        + "  - {catalog: lake2, namespace: s, name: coded, actions: {expire-snapshots: {}}}\n"
    )
    result = load_registry_and_build(y, store=store)
    assert any("lake2" in e and "same tables as catalog lake" in e for e in result.errors), result.errors
    assert "tms__lake2.s.coded__expire-snapshots" not in result.dags
    assert {STORE_DAG, CODE_DAG} <= set(result.dags)
    assert [c.name for c in store.catalogs.list()] == ["lake"]
    assert live(store) == ["lake.s.coded", "lake.s.from_cli"]


def test_a_file_catalog_the_store_refuses_gets_no_dags_and_prunes_nothing(
    store: Store, tmp_path: Path
) -> None:
    from airflow_tablemgmt.core.tables import CatalogSpec

    y = seed(store, tmp_path)
    store.catalogs.upsert(CatalogSpec(name="other", warehouse="/data/other"), Owner.STORE)
    y.write_text(
        "catalogs:\n  - {name: lake, warehouse: /data/wh}\n  - {name: lake3, warehouse: 'file:/data/other/'}\n"
        "tables:\n  - {catalog: lake3, namespace: s, name: t, actions: {expire-snapshots: {}}}\n"
    )
    result = load_registry_and_build(y, store=store)
    assert any(e.startswith("catalog lake3: ") and "same tables as catalog other" in e for e in result.errors)
    assert any("table lake3.s.t: not registered" in e for e in result.errors)
    assert "tms__lake3.s.t__expire-snapshots" not in result.dags
    assert {STORE_DAG, CODE_DAG} <= set(result.dags)  # lake.s.coded is no longer listed, but not pruned
    assert live(store) == ["lake.s.coded", "lake.s.from_cli"]
