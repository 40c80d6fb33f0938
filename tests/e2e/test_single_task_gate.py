"""A snapshot-driven DAG is one task: ``maintain`` makes the snapshot gate's checks before it opens a
process or takes a lease. Airflow's own DagBag and ``dag.test()``, real Iceberg tables, a real store."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import make_table
from tests.e2e.iceberg_reads import read_state

pytestmark = pytest.mark.e2e

TABLE = "gate1.db.events"
ACTION = "rewrite-files"
DAG_ID = f"tms__{TABLE}__{ACTION}"

TABLES_YAML = """
version: 1
catalogs:
  - {{name: gate1, type: hadoop, warehouse: {warehouse}}}
tables:
  - catalog: gate1
    namespace: db
    name: events
    actions:
      rewrite-files: {{min-input-files: 2}}
      compute-stats: {{interval: 6h}}
"""


def _task_states(dag_id: str, run_id: str) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run_id).all()
        return {ti.task_id: str(ti.state) for ti in tis}


@contextmanager
def _runs_consume(asset_name: str, extra: dict[str, Any]) -> Iterator[None]:
    """Every DAG run created inside consumes a new asset event of ``asset_name`` with ``extra``, as
    when the scheduler creates a run for a watcher's event (the task's ``triggering_asset_events``)."""
    import sqlalchemy as sa
    from airflow.models.asset import AssetEvent, AssetModel, association_table
    from airflow.models.dagrun import DagRun
    from airflow.utils import timezone

    def link(_mapper: Any, connection: Any, run: DagRun) -> None:
        # dag.test() has synced the DAG, and so its asset, to Airflow's DB before it creates the run.
        asset_id = connection.execute(
            sa.select(AssetModel.id).where(AssetModel.name == asset_name)
        ).scalar_one()
        event_id = connection.execute(
            sa.insert(AssetEvent.__table__)
            .values(asset_id=asset_id, extra=extra, timestamp=timezone.utcnow())
            .returning(AssetEvent.__table__.c.id)
        ).scalar_one()
        connection.execute(sa.insert(association_table).values(dag_run_id=run.id, event_id=event_id))

    sa.event.listen(DagRun, "after_insert", link)
    try:
        yield
    finally:
        sa.event.remove(DagRun, "after_insert", link)


def test_one_task_checks_the_event_then_the_snapshot_before_any_process_or_lease(
    airflow_db: str, dags_folder: Path, tmp_path: Path
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

    table = make_table(tmp_path / "warehouse", TABLE, files=6, rows=600)
    (dags_folder / "tables.yaml").write_text(TABLES_YAML.format(warehouse=table.warehouse))
    bag = DagBag(dag_folder=str(dags_folder))
    assert DAG_ID in bag.dags, bag.import_errors
    dag = bag.dags[DAG_ID]
    assert [t.task_id for t in dag.tasks] == ["maintain"]  # no check_snapshot task
    assert dag.get_task("maintain").gate == "event"
    store = TableMgmtHook().get_store()
    before = read_state(table.metadata_dir)

    # 1. The table's watcher event is for compute-stats only: rewrite-files is not due. No process
    #    ever handled the table's snapshot, so only the event check can skip this run.
    payload = {"table": TABLE, "snapshot_id": before.snapshot_id, "actions": {"compute-stats": 1}}
    with _runs_consume(f"tablemgmt.{TABLE}", {"from_trigger": True, "payload": payload}):
        held_back = dag.test()
    assert _task_states(DAG_ID, held_back.run_id) == {"maintain": "skipped"}
    assert store.processes.list(table_id=TABLE, action=ACTION) == []
    assert read_state(table.metadata_dir).snapshot_id == before.snapshot_id

    # 2. An event for rewrite-files (and another action) on the new snapshot: the process opens and
    #    the job runs.
    payload = {
        "table": TABLE,
        "snapshot_id": before.snapshot_id,
        "actions": {"rewrite-files": 1, "compute-stats": 1},
    }
    with _runs_consume(f"tablemgmt.{TABLE}", {"from_trigger": True, "payload": payload}):
        ran = dag.test()
    assert _task_states(DAG_ID, ran.run_id) == {"maintain": "success"}
    [done] = store.processes.list(table_id=TABLE, action=ACTION)
    assert done.status == ProcessStatus.SUCCESS and done.run_id == ran.run_id
    after = read_state(table.metadata_dir)
    assert after.data_files < before.data_files and done.snapshot_id == after.snapshot_id

    # 3. Unchanged since: the run skips before it opens a process or asks for the lease, so a lease
    #    held by someone else neither defers it nor is touched.
    assert store.leases.acquire(TABLE, "someone-else", timedelta(minutes=10))
    unchanged = dag.test()
    assert _task_states(DAG_ID, unchanged.run_id) == {"maintain": "skipped"}
    assert [p.id for p in store.processes.list(table_id=TABLE, action=ACTION)] == [done.id]
    lease = store.leases.get(TABLE)
    assert lease is not None and lease.holder == "someone-else"


FAILING_YAML = """
version: 1
catalogs:
  - {{name: gone, type: hadoop, warehouse: {warehouse}}}
  - {{name: down, type: rest, properties: {{uri: "http://127.0.0.1:{port}"}}}}
tables:
  - {{catalog: gone, namespace: db, name: missing, actions: {{rewrite-files: {{retries: 0}}}}}}
  - {{catalog: down, namespace: db, name: events, actions: {{rewrite-files: {{retries: 0}}}}}}
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("dag_id", "message"),
    [
        ("tms__gone.db.missing__rewrite-files", "no Iceberg table in hadoop catalog 'gone'"),
        ("tms__down.db.events__rewrite-files", "could not check the current snapshot of down.db.events"),
    ],
)
def test_a_check_that_cannot_be_made_fails_the_task_and_opens_no_process(
    airflow_db: str,
    dags_folder: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    dag_id: str,
    message: str,
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

    (tmp_path / "warehouse").mkdir()
    yaml = FAILING_YAML.format(warehouse=tmp_path / "warehouse", port=_closed_port())
    (dags_folder / "tables.yaml").write_text(yaml)
    bag = DagBag(dag_folder=str(dags_folder))
    assert dag_id in bag.dags, bag.import_errors
    capfd.readouterr()
    run = bag.dags[dag_id].test()  # runs the task in this process: its log is this process's output
    log = "".join(capfd.readouterr())
    assert run.state == "failed"
    assert _task_states(dag_id, run.run_id) == {"maintain": "failed"}
    table_id = dag_id.split("__")[1]
    assert TableMgmtHook().get_store().processes.list(table_id=table_id) == []
    assert message in log
