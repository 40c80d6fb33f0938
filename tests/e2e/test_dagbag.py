"""The shipped dags/ folder loads with no import errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.e2e


def test_shipped_dags_folder_has_no_import_errors(tmp_path: Path) -> None:
    from airflow.dag_processing.dagbag import DagBag

    for name in ("tablemgmt_dags.py", "tables.yaml"):
        shutil.copy(ROOT / "dags" / name, tmp_path / name)
    bag = DagBag(dag_folder=str(tmp_path))
    assert bag.import_errors == {}


CATALOG = "catalogs: [{name: lake, warehouse: /data/wh}]\n"
STORE_DAG = "tms__lake.s.from_cli__expire-snapshots"
CODE_DAG = "tms__lake.s.coded__expire-snapshots"


@pytest.fixture
def folder_with_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A dags folder with the shipped DAG file and its own store holding one code-owned and one
    store-owned table (as `tablemgmt apply` and `tablemgmt register` leave them)."""
    from airflow_tablemgmt.core.tables import Owner, TableSpec
    from airflow_tablemgmt.declarations import apply_declarations, parse_declarations_text
    from airflow_tablemgmt.store import Store

    folder = tmp_path / "dags"
    folder.mkdir()
    shutil.copy(ROOT / "dags" / "tablemgmt_dags.py", folder / "tablemgmt_dags.py")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)
    store = Store.for_url(url)
    declared = (
        CATALOG + "tables: [{catalog: lake, namespace: s, name: coded, actions: {expire-snapshots: {}}}]\n"
    )
    apply_declarations(store, parse_declarations_text(declared, "tables.yaml"))
    spec = {"catalog": "lake", "namespace": "s", "name": "from_cli", "actions": {"expire-snapshots": {}}}
    store.tables.upsert(TableSpec.model_validate(spec), Owner.STORE)
    return folder, store


@pytest.mark.parametrize("kind", ["not-utf8", "directory", "yaml-error", "bad-entry"])
def test_a_broken_tables_yaml_is_an_import_error_and_the_other_dags_stay(
    folder_with_store, kind: str
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    folder, store = folder_with_store
    y = folder / "tables.yaml"
    if kind == "not-utf8":
        y.write_bytes(CATALOG.encode() + b"tables: []  # caf\xe9\n")
    elif kind == "directory":
        y.mkdir()
    elif kind == "yaml-error":
        y.write_text(CATALOG + "tables: [\n")
    else:
        y.write_text(
            CATALOG + "tables: [{catalog: lake, namespace: s, name: coded, priority: 99999999999999999999}]\n"
        )
    bag = DagBag(dag_folder=str(folder))
    assert {STORE_DAG, CODE_DAG} <= set(bag.dag_ids)
    (err,) = bag.import_errors.values()
    assert "tables.yaml" in err
    assert sorted(t.table_id for t in store.tables.list()) == ["lake.s.coded", "lake.s.from_cli"]


def test_explicit_empty_tables_list_logs_and_keeps(
    folder_with_store, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from airflow.dag_processing.dagbag import DagBag

    folder, store = folder_with_store
    (folder / "tables.yaml").write_text(CATALOG + "tables: []\n")
    with caplog.at_level(logging.WARNING):
        bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    assert {STORE_DAG, CODE_DAG} <= set(bag.dag_ids)
    assert sorted(t.table_id for t in store.tables.list()) == ["lake.s.coded", "lake.s.from_cli"]
    assert any("would prune" in r.getMessage() and "lake.s.coded" in r.getMessage() for r in caplog.records)


def test_team_files_in_tables_d_load_and_a_broken_one_is_its_own_import_error(folder_with_store) -> None:
    from airflow.dag_processing.dagbag import DagBag

    folder, store = folder_with_store
    (folder / "tables.yaml").write_text(
        CATALOG + "tables: [{catalog: lake, namespace: s, name: coded, actions: {expire-snapshots: {}}}]\n"
    )
    (folder / "tables.d").mkdir()
    (folder / "tables.d" / "team_a.yaml").write_text(
        "tables: [{catalog: lake, namespace: a, name: t1, actions: {expire-snapshots: {}}}]\n"
    )
    team_b = folder / "tables.d" / "team_b.yaml"
    team_b.write_text(
        "tables: [{catalog: lake, namespace: b, name: t1, actions: {expire-snapshots: {retain-last: 0}}}]\n"
    )
    bag = DagBag(dag_folder=str(folder))
    assert {STORE_DAG, CODE_DAG, "tms__lake.a.t1__expire-snapshots"} <= set(bag.dag_ids)
    assert "tms__lake.b.t1__expire-snapshots" not in bag.dag_ids
    (err,) = bag.import_errors.values()
    assert str(team_b) in err and "lake.b.t1" in err and "team_a" not in err
    assert "lake.a.t1" in [t.table_id for t in store.tables.list()]


def test_a_task_start_parses_one_dag_from_a_synced_team_file(
    folder_with_store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    folder, _ = folder_with_store
    (folder / "tables.yaml").write_text(CATALOG + "tables: [{catalog: lake, namespace: s, name: coded}]\n")
    (folder / "tables.d").mkdir()
    (folder / "tables.d" / "team_a.yaml").write_text(
        "tables:\n"
        + "".join(
            f"  - {{catalog: lake, namespace: a, name: t{i}, actions: {{expire-snapshots: {{}}}}}}\n"
            for i in range(50)
        )
    )
    assert not DagBag(dag_folder=str(folder)).import_errors  # the dag-processor's parse syncs the files
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "tms__lake.a.t7__expire-snapshots")
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_TASK_ID", "maintain")
    bag = DagBag(dag_folder=str(folder))
    assert bag.dag_ids == ["tms__lake.a.t7__expire-snapshots"] and not bag.import_errors
