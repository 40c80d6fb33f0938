"""A chain of two dynamic tables declared in tables.yaml, run by their own DAGs (dag.test(), real
spark-submit): each table is created by its first refresh (trigger CREATION); the upstream's refresh
task emits its refresh asset, which queues a run of the downstream DAG (``freshness: downstream``);
the downstream's refresh then reads what the upstream wrote."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from airflow_tablemgmt.core.process import ProcessStatus
from tests.e2e.conftest import ROOT, airflow_db  # noqa: F401 - the fixture, used by name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(1200)]

TABLES_YAML = """
version: 1
catalogs:
  - {{name: lake, type: hadoop, warehouse: {warehouse}}}
dynamic-tables:
  - identifier: lake.db.chain_daily
    query: SELECT day, count(*) AS n FROM lake.db.chain_src GROUP BY day
    freshness: 1 DAY
  - identifier: lake.db.chain_total
    query: SELECT sum(n) AS total FROM lake.db.chain_daily
    freshness: downstream
"""
UP, DOWN = "tms__lake.db.chain_daily__refresh", "tms__lake.db.chain_total__refresh"


def test_upstream_refresh_then_downstream(
    airflow_db: str,  # noqa: F811
    spark: SparkSession,
    warehouse: Path,
    tmp_path: Path,
) -> None:
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.models.asset import AssetDagRunQueue, AssetEvent, AssetModel
    from airflow.utils.session import create_session

    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

    spark.sql("CREATE TABLE lake.db.chain_src (id bigint, day string) USING iceberg")
    spark.sql("INSERT INTO lake.db.chain_src VALUES (1, 'a'), (2, 'a'), (3, 'b')")
    folder = tmp_path / "dags"
    folder.mkdir()
    shutil.copy(ROOT / "dags" / "tablemgmt_dags.py", folder / "tablemgmt_dags.py")
    (folder / "tables.yaml").write_text(TABLES_YAML.format(warehouse=warehouse))
    DagBundlesManager().sync_bundles_to_db()
    bag = BundleDagBag(dag_folder=str(folder), bundle_path=folder, bundle_name="dags-folder")
    assert not bag.import_errors, bag.import_errors
    assert {UP, DOWN} <= set(bag.dags)
    sync_bag_to_db(bag, "dags-folder", None)  # as the dag processor: the downstream DAG consumes the asset

    store = TableMgmtHook().get_store()
    assert store.dynamic.get("lake.db.chain_daily").state == "CREATING"  # declared, not created at parse

    up_run = bag.dags[UP].test()
    assert up_run.state == "success"
    up = store.dynamic.get("lake.db.chain_daily")
    assert up.state == "ACTIVE"
    assert up.definition.source_tables == ["lake.db.chain_src"]
    [created] = store.processes.list(table_id="lake.db.chain_daily", action="refresh")
    assert created.status == ProcessStatus.SUCCESS and created.summary["trigger"] == "CREATION"
    with create_session() as session:
        asset = session.query(AssetModel).filter_by(name="tablemgmt.refresh.lake.db.chain_daily").one()
        assert session.query(AssetEvent).filter_by(asset_id=asset.id).count() == 1
        queued = session.query(AssetDagRunQueue).filter_by(asset_id=asset.id).all()
        assert [q.target_dag_id for q in queued] == [DOWN]  # the scheduler's next downstream run

    down_run = bag.dags[DOWN].test()
    assert down_run.state == "success"
    assert spark.sql("SELECT total FROM lake.db.chain_total").collect()[0][0] == 3
    down = store.dynamic.get("lake.db.chain_total")
    assert down.state == "ACTIVE" and down.definition.source_tables == ["lake.db.chain_daily"]
