"""A policy reaches a declared table's DAGs end to end: the project's DAG file parsed by Airflow's DagBag builds a
table registered through the real CLI (``tablemgmt register``, owned by the store) with the stored policies merged
in — an action only the policy enables gets its DAG, a key the table does not set takes the policy's value, a key
it sets keeps its own — and ``tablemgmt explain`` says ``applied: true``. A policy changed through the CLI reaches
the DAG at the next parse (the DAG cache's key holds the matching policies), and the worker side reads the same
merged spec (``effective_table``). No JVM."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from tests.e2e.conftest import BIN, run

pytestmark = pytest.mark.e2e

TABLE = "lake.sales.orders"
ORPHANS = f"tms__{TABLE}__delete-orphans"
MANIFESTS = f"tms__{TABLE}__rewrite-manifests"


def test_a_policy_reaches_a_registered_tables_dags(
    airflow_db: str, dags_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.effective import effective_table

    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)

    def tablemgmt(*args: str) -> subprocess.CompletedProcess[str]:
        res = run([str(BIN / "tablemgmt"), "--store-url", url, *args], timeout=120)
        assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
        return res

    tablemgmt(
        "register",
        TABLE,
        "--catalog-type",
        "hadoop",
        "--warehouse",
        f"file://{tmp_path / 'warehouse'}",
        "--action",
        "delete-orphans",
        "--set",
        "delete-orphans.retries=2",
    )
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "name: lake-all\nmatch: {catalog: lake, format: iceberg}\n"
        "actions:\n  delete-orphans: {interval: 3d, retries: 5}\n  rewrite-manifests: {trigger: schedule}\n"
    )
    tablemgmt("policies", "apply", "-f", str(policy))

    bag = DagBag(dag_folder=str(dags_folder))
    assert not bag.import_errors, bag.import_errors
    orphans = bag.get_dag(ORPHANS)
    assert orphans.timetable.delta == timedelta(days=3)  # the policy's: the table sets no interval
    assert [t.retries for t in orphans.tasks] == [2]  # the table's own value wins
    assert bag.get_dag(MANIFESTS) is not None  # an action only the policy enables
    doc = json.loads(tablemgmt("explain", TABLE, "--json").stdout)
    assert doc["applied"] is True
    assert doc["actions"]["delete-orphans"]["interval"] == {"value": "3d", "source": "policy:lake-all"}
    assert doc["actions"]["delete-orphans"]["retries"] == {"value": 2, "source": "table"}
    store = Store.for_url(url)
    worker = effective_table(store, TABLE)  # what the operator, the gate and the runner read
    assert worker.action_settings("delete-orphans").interval == "3d" and "rewrite-manifests" in worker.actions

    policy.write_text(
        "name: lake-all\nmatch: {catalog: lake, format: iceberg}\nactions:\n  delete-orphans: {interval: 12h}\n"
    )
    tablemgmt("policies", "apply", "-f", str(policy))
    again = DagBag(dag_folder=str(dags_folder))
    assert not again.import_errors, again.import_errors
    assert again.get_dag(ORPHANS).timetable.delta == timedelta(hours=12)
    assert MANIFESTS not in again.dag_ids
