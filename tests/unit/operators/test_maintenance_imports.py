"""The maintenance operator imports what only its run needs inside ``execute`` (a task start's parse of the
DAG file pays for every module-level import: ``tests/unit/dag_factory/test_task_start_imports.py``). These
run the parts of ``execute`` that use those names, so a name left to the type checker alone fails here."""

from __future__ import annotations

from pathlib import Path

from airflow_tablemgmt.core.factory import RunPlan
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.operators.maintenance import TableMaintenanceOperator
from airflow_tablemgmt.store import Store


def test_a_plain_factory_makes_an_empty_run_plan(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    store.tables.upsert(
        TableSpec(catalog="lake", namespace="s", name="t", actions={"rewrite-files": {}}), Owner.STORE
    )
    op = TableMaintenanceOperator(task_id="maintain", table="lake.s.t", action="rewrite-files")
    plan = op._plan(store, default_factories(), {})
    assert plan == RunPlan() and not plan.skip_reason
    store.dispose()
