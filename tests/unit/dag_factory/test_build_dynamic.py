"""Dynamic tables' refresh DAGs: the freshness cron, downstream chains on refresh assets, the outlet,
and the shipped DAG file loading a tables.yaml with dynamic-tables (Airflow's DagBag, serialization)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from airflow_tablemgmt.core.dynamic import DynamicTableSpec
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.dag_factory.assets import REFRESH, event_plans, refresh_asset
from airflow_tablemgmt.dag_factory.build import build_dags
from airflow_tablemgmt.factories.discovery import load_factories

ROOT = Path(__file__).resolve().parents[3]
FACTORIES = load_factories()


def view(identifier: str, query: str, freshness: str, **more: object) -> TableSpec:
    return DynamicTableSpec.model_validate(
        {"identifier": identifier, "query": query, "freshness": freshness, **more}
    ).table_spec()


DAILY = view("lake.db.daily", "SELECT * FROM lake.db.events", "1 DAY", owner="bi", retries=3)
HOURLY = view("lake.db.hourly", "SELECT * FROM lake.db.events", "INTERVAL '15' MINUTE")
WEEKLY = view("lake.db.weekly", "SELECT * FROM lake.db.daily JOIN lake.db.events USING (day)", "downstream")
BOTH = view(
    "lake.db.both", "SELECT * FROM lake.db.daily UNION ALL SELECT * FROM lake.db.hourly", "downstream"
)


def _asset_names(condition: object) -> set[str]:
    from airflow.sdk import Asset

    if isinstance(condition, Asset):
        return {condition.name}
    return {n for a in condition.objects for n in _asset_names(a)}  # type: ignore[attr-defined]


def test_refresh_dag_runs_on_the_freshness_cron_and_emits_its_asset() -> None:
    from airflow.sdk import CronTriggerTimetable

    result = build_dags([DAILY, HOURLY], FACTORIES)
    assert result.errors == []
    dag = result.dags["tms__lake.db.daily__refresh"]
    assert isinstance(dag.timetable, CronTriggerTimetable)
    assert (dag.timetable.expression, str(dag.timetable.timezone)) == ("0 0 * * *", "UTC")
    assert result.dags["tms__lake.db.hourly__refresh"].timetable.expression == "*/15 * * * *"
    assert set(dag.tags) == {"tablemgmt", "lake.db.daily", "refresh", "iceberg"}
    [task] = dag.tasks
    assert (task.task_id, task.owner, task.retries) == ("maintain", "bi", 3)
    assert [a.name for a in task.outlets] == ["tablemgmt.refresh.lake.db.daily"]
    # never a snapshot watcher: a refresh reads other tables
    assert event_plans(DAILY, FACTORIES) == {}


def test_downstream_is_scheduled_on_its_registered_upstream_refreshes() -> None:
    result = build_dags([DAILY, HOURLY, WEEKLY, BOTH], FACTORIES)
    assert result.errors == []
    weekly = result.dags["tms__lake.db.weekly__refresh"]
    # lake.db.events is named by the query but is no dynamic table: left out of the schedule
    assert _asset_names(weekly.timetable.asset_condition) == {"tablemgmt.refresh.lake.db.daily"}
    both = result.dags["tms__lake.db.both__refresh"]
    from airflow.sdk import AssetAny

    assert isinstance(both.timetable.asset_condition, AssetAny)  # after a refresh of either
    assert _asset_names(both.timetable.asset_condition) == {
        "tablemgmt.refresh.lake.db.daily",
        "tablemgmt.refresh.lake.db.hourly",
    }
    # the upstream's refresh task updates exactly the asset the downstream waits for
    daily_outlet = result.dags["tms__lake.db.daily__refresh"].tasks[0].outlets[0]
    assert daily_outlet == refresh_asset("lake.db.daily")
    assert "after each successful refresh" in weekly.description


def test_a_single_dag_build_keeps_every_named_upstream() -> None:
    """A task start builds one DAG without the registry: its schedule lists every table the query
    names (an asset nobody emits never starts a run); the task is the same."""
    result = build_dags([WEEKLY], FACTORIES, only_dag_id="tms__lake.db.weekly__refresh")
    dag = result.dags["tms__lake.db.weekly__refresh"]
    assert _asset_names(dag.timetable.asset_condition) == {
        "tablemgmt.refresh.lake.db.daily",
        "tablemgmt.refresh.lake.db.events",
    }
    assert [t.task_id for t in dag.tasks] == ["maintain"]


def test_refresh_dags_serialize() -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    result = build_dags([DAILY, WEEKLY], FACTORIES)
    for dag in result.dags.values():
        data = DagSerialization.to_dict(dag)
        back = DagSerialization.from_dict(data)
        assert back.dag_id == dag.dag_id
    assert REFRESH == "refresh"


def test_shipped_dag_file_loads_dynamic_tables_in_a_dagbag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from airflow_tablemgmt.store import Store

    folder = tmp_path / "dags"
    folder.mkdir()
    shutil.copy(ROOT / "dags" / "tablemgmt_dags.py", folder / "tablemgmt_dags.py")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)
    (folder / "tables.yaml").write_text(
        "catalogs: [{name: lake, warehouse: /data/wh}]\n"
        "dynamic-tables:\n"
        "  - identifier: lake.db.daily\n"
        "    query: SELECT day, count(*) AS n FROM lake.db.events GROUP BY day\n"
        "    freshness: 1 DAY\n"
        "    partitioned-by: [day]\n"
        "    partition.fields.day.date-formatter: yyyy-MM-dd\n"
        "  - {identifier: lake.db.weekly, query: SELECT * FROM lake.db.daily, freshness: downstream}\n"
        "  - {identifier: lake.db.bad, query: SELECT 1, freshness: 5 HOUR}\n"
    )
    bag = DagBag(dag_folder=str(folder))
    assert {"tms__lake.db.daily__refresh", "tms__lake.db.weekly__refresh"} <= set(bag.dag_ids)
    [error] = bag.import_errors.values()
    assert (
        "dynamic-tables[2].freshness (dynamic table lake.db.bad): '5 HOUR' cannot be a full-refresh cron"
        in error
    )
    assert "allowed for HOUR: 1, 2, 3, 4, 6, 8, 12, 24" in error
    weekly = bag.dags["tms__lake.db.weekly__refresh"]
    assert _asset_names(weekly.timetable.asset_condition) == {"tablemgmt.refresh.lake.db.daily"}
    store = Store.for_url(url)
    try:
        assert [str(d.state) for d in store.dynamic.list()] == ["CREATING", "CREATING"]
    finally:
        store.dispose()


def test_a_suspended_table_keeps_its_dag(tmp_path: Path) -> None:
    """Suspend pauses the DAG through Airflow; the DAG file still builds it."""
    from airflow_tablemgmt.core.tables import Owner
    from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build
    from airflow_tablemgmt.declarations.parse import parse_declarations_text
    from airflow_tablemgmt.store import Store

    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        store.catalogs.upsert(
            parse_declarations_text("catalogs: [{name: lake, warehouse: /w}]", "c").catalogs[0], Owner.STORE
        )
        store.dynamic.upsert(
            DynamicTableSpec.model_validate(
                {"identifier": "lake.db.daily", "query": "SELECT 1", "freshness": "1 DAY"}
            ),
            Owner.STORE,
        )
        store.dynamic.set_state("lake.db.daily", "SUSPENDED", reason="suspended by a user")
        result = load_registry_and_build(tmp_path / "none.yaml", store=store)
        assert "tms__lake.db.daily__refresh" in result.dags and result.errors == []
    finally:
        store.dispose()
