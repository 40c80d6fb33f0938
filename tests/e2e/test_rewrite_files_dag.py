"""The walking skeleton end to end: tables.yaml -> DAG -> Spark rewrite -> process row + XCom."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import make_table
from tests.e2e.iceberg_reads import read_state

pytestmark = pytest.mark.e2e

TABLES_YAML = """
version: 1
catalogs:
  - {{name: e2e, type: hadoop, warehouse: {warehouse}}}
tables:
  - catalog: e2e
    namespace: db
    name: events
    owner: e2e-team
    actions:
      rewrite-files: {{interval: 1h, min-input-files: 2, target-file-size-bytes: 134217728}}
  - catalog: e2e
    namespace: db
    name: broken
    actions:
      expire-snapshots: {{retain-last: 0}}
"""


def test_declared_table_is_compacted_by_its_dag(airflow_db: str, dags_folder: Path, tmp_path: Path) -> None:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

    table = make_table(tmp_path / "warehouse", "e2e.db.events", files=60, rows=6000)
    before = read_state(table.metadata_dir)
    assert before.data_files >= 60
    (dags_folder / "tables.yaml").write_text(TABLES_YAML.format(warehouse=table.warehouse))

    bag = DagBag(dag_folder=str(dags_folder))
    dag_id = "tms__e2e.db.events__rewrite-files"
    assert dag_id in bag.dags, bag.import_errors
    # The broken table is an import error naming it; the good table's DAG still loaded.
    errors = "\n".join(bag.import_errors.values())
    assert "tables[1].actions.expire-snapshots.retain-last (table e2e.db.broken)" in errors

    dag = bag.dags[dag_id]
    assert dag.get_task("maintain").owner == "e2e-team"
    run = dag.test()
    assert run.state == "success"

    after = read_state(table.metadata_dir)
    assert after.data_files < before.data_files
    assert after.data_files <= 4  # one per day partition
    assert (after.records, after.checksum) == (before.records, before.checksum)

    store = TableMgmtHook().get_store()
    [process] = store.processes.list(table_id="e2e.db.events", action="rewrite-files")
    assert process.status == ProcessStatus.SUCCESS
    assert process.dag_id == dag_id and process.run_id == run.run_id and process.attempt == 1
    summary = process.summary
    assert summary["before"]["data_files"] == before.data_files
    assert summary["after"]["data_files"] == after.data_files
    assert summary["before"]["live_records"] == summary["after"]["live_records"] == before.records
    assert summary["after"]["physical_rows"] <= summary["before"]["physical_rows"]
    assert process.snapshot_id == after.snapshot_id

    with create_session() as session:
        xcom = (
            session.query(XComModel)
            .filter_by(dag_id=dag_id, run_id=run.run_id, task_id="maintain", key="return_value")
            .one()
        )
        assert XComModel.deserialize_value(xcom) == summary
