"""A policy's planned (policy, action) DAG end to end (ADR 0004): the project's DAG file parsed by Airflow's DagBag
builds ``tms__plan__fleet__rewrite-files``, and ``dag.test()`` runs its ``plan`` task and its ``run_batch`` task
mapped over the batches, on real Iceberg tables written by pyiceberg (a SQL catalog on SQLite) and a real store.

Without a JVM: the tables the plan selects are ones whose stored health is stale (measured before someone else
compacted them), so the health gate, reading each table again right before its job, skips them (the gate is the
last word); one of them is leased by another job and is skipped with that reason; a table never measured is
measured by the plan task and not selected. With a JVM (the second test): two unhealthy tables are compacted by
the default local Spark engine, the healthy one is not selected."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType, Owner, TableSpec

pytestmark = pytest.mark.e2e

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
ACTION = "rewrite-files"
DAG_ID = "tms__plan__fleet__rewrite-files"
ELSEWHERE = "tms__lake.db.t_leased__rewrite-files/manual__elsewhere/maintain/1"


def _lake(tmp_path: Path) -> tuple[Any, CatalogSpec]:
    from pyiceberg.catalog.sql import SqlCatalog

    db, warehouse = tmp_path / "catalog.db", tmp_path / "warehouse"
    warehouse.mkdir()
    client = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    client.create_namespace("db")
    client.create_namespace("other")
    spec = CatalogSpec(
        name="lake",
        type=CatalogType.JDBC,
        warehouse=f"file://{warehouse}",
        properties={"uri": f"jdbc:sqlite:{db}"},
    )
    return client, spec


def _table(client: Any, ident: str, files: int) -> None:
    table = client.create_table(ident, schema=SCHEMA)
    for i in range(files):
        table.append(pa.table({"id": [i * 10 + j for j in range(10)], "v": ["x"] * 10}, schema=SCHEMA))


def _task_instances(dag_id: str, run_id: str) -> list[Any]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run_id).all()
        session.expunge_all()
        return tis


def test_the_plan_selects_from_stored_health_and_the_batches_skip_what_the_gate_and_the_lease_say(
    airflow_db: str, dags_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.services import health
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.enrolment import EnrolmentRepository
    from airflow_tablemgmt.store.planning import PlanningRepository
    from airflow_tablemgmt.store.policies import PolicyRepository

    monkeypatch.setenv("TABLEMGMT_HEALTH_GATE", "1")  # the product's default (the suite turns it off)
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_BATCH_SIZE", "2")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", "off")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)
    client, catalog = _lake(tmp_path)
    store = Store.for_url(url)
    store.catalogs.upsert(catalog, Owner.STORE)
    policy = {"name": "fleet", "match": {"catalog": "lake", "format": "iceberg"}, "actions": {ACTION: {}}}
    PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)

    stale = ["t1", "t2", "t3", "t4", "t_leased"]  # healthy now, stored health says 8 small files
    _table(client, "other.small", 8)  # not enrolled: where the stale figures come from
    small = health.read_file_stats(catalog, TableSpec(catalog="lake", namespace="other", name="small"))
    enrol = EnrolmentRepository.of(store)
    for name in [*stale, "t_unmeasured"]:
        _table(client, f"db.{name}", 1)
        enrol.enrol(
            TableSpec(catalog="lake", namespace="db", name=name, actions={ACTION: {}}), "fleet", "matched"
        )
    for name in stale:
        health.remember(store, f"lake.db.{name}", small)
    assert store.leases.acquire("lake.db.t_leased", ELSEWHERE, timedelta(minutes=10))

    bag = DagBag(dag_folder=str(dags_folder))
    dag = bag.get_dag(DAG_ID)
    assert dag is not None, (bag.import_errors, sorted(bag.dag_ids))
    assert not [d for d in bag.dag_ids if d.startswith("tms__lake.db.")]  # no DAG per enrolled table
    run = dag.test()
    assert run.state == "success"

    tis = _task_instances(DAG_ID, run.run_id)
    batches = sorted(ti.map_index for ti in tis if ti.task_id == "run_batch")
    assert batches == [0, 1, 2]  # 5 selected tables in batches of 2: three mapped tasks
    labels = sorted(ti.rendered_map_index for ti in tis if ti.task_id == "run_batch")
    assert labels == ["lake.db.t1 +1", "lake.db.t3 +1", "lake.db.t_leased"], labels  # the grid's names
    assert {ti.task_id: str(ti.state) for ti in tis} == {"plan": "success", "run_batch": "success"}

    processes = {p.table_id: p for p in store.processes.list(action=ACTION, limit=100)}
    assert sorted(processes) == sorted(f"lake.db.{n}" for n in stale)  # the unmeasured table was not selected
    for table_id, p in processes.items():
        assert p.status == ProcessStatus.SUCCESS and (p.summary or {}).get("skipped"), (table_id, p)
        assert p.run_id == run.run_id and p.dag_id == DAG_ID and p.task_id == "run_batch"
        assert p.parameters["plan"]["map_index"] in (0, 1, 2) and p.parameters["plan"]["run_id"] == run.run_id
    leased = processes.pop("lake.db.t_leased").summary or {}
    assert leased["gate"] == "lease" and ELSEWHERE in leased["reason"] and "next plan" in leased["reason"]
    for p in processes.values():  # the gate read each again: nothing to compact
        assert (p.summary or {})["gate"] == "health" and "does not pay" in (p.summary or {})["reason"]
    assert store.leases.get("lake.db.t_leased").holder == ELSEWHERE  # type: ignore[union-attr]

    # the plan task measured the unmeasured table; each batch measured its tables again after their process
    rows = {r.table_id: r for r in PlanningRepository.of(store).rows("fleet")}
    assert rows["lake.db.t_unmeasured"].figures is not None
    assert all((rows[f"lake.db.{n}"].figures or {}).get("data_files") == 1 for n in stale)

    # so the next run has nothing to do: no batch is mapped and no process opened
    quiet = dag.test()
    assert quiet.state == "success"
    assert {ti.task_id: str(ti.state) for ti in _task_instances(DAG_ID, quiet.run_id)} == {
        "plan": "success",
        "run_batch": "skipped",
    }
    assert len(store.processes.list(action=ACTION, limit=100)) == len(stale)
    store.dispose()
    client.engine.dispose()
