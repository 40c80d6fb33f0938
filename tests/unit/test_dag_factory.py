from datetime import timedelta

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import CatalogSpec, parse_table
from airflow_tablemgmt.dag_factory import BROKEN_DAG_ID, build_dags, dag_id_for, parse_dag_id
from airflow_tablemgmt.factories.discovery import load_factories

CATALOGS = {"lake": CatalogSpec(name="lake", warehouse="/tmp/wh")}


def table(name: str, actions: dict, **kw: object):  # type: ignore[no-untyped-def]
    return parse_table({"catalog": "lake", "namespace": "db", "name": name, "actions": actions, **kw})


def test_one_dag_per_enabled_action_with_ids_tags_and_schedule() -> None:
    t = table("events", {"rewrite-files": {"interval": "0 3 * * *", "trigger": "schedule"}, "expire-snapshots": {},
                         "delete-orphans": {"enabled": False}}, owner="team-a", priority=7, queue="maint")  # fmt: skip
    res = build_dags([t], load_factories(), catalogs=CATALOGS)
    assert sorted(res.dags) == [
        dag_id_for("lake.db.events", "expire-snapshots"),
        "tms__lake.db.events__rewrite-files",
    ]
    dag = res.dags["tms__lake.db.events__rewrite-files"]
    assert set(dag.tags) >= {"tablemgmt", "lake.db.events", "rewrite-files", "iceberg"}
    assert type(dag.timetable).__name__ == "CronTriggerTimetable" and dag.timetable.expression == "0 3 * * *"
    task = dag.get_task("maintain")
    assert task.owner == "team-a" and task.priority_weight == 7 and task.pool == "maint"
    assert task.retries == 1 and task.retry_delay == timedelta(minutes=5)
    es = res.dags["tms__lake.db.events__expire-snapshots"]
    assert type(es.timetable).__name__ == "DeltaTriggerTimetable"  # factory default: 1d
    assert dag.max_active_runs == 1 and dag.max_active_tasks == 4
    assert res.errors == []


def test_parse_dag_id_roundtrip_and_only_builds_one() -> None:
    assert parse_dag_id("tms__lake.db.events__rewrite-files") == ("lake.db.events", "rewrite-files")
    assert parse_dag_id("other") is None
    tables = [table(f"t{i}", {"rewrite-files": {}, "expire-snapshots": {}}) for i in range(50)]
    res = build_dags(
        tables, load_factories(), only_dag_id="tms__lake.db.t7__expire-snapshots", catalogs=CATALOGS
    )
    assert list(res.dags) == ["tms__lake.db.t7__expire-snapshots"]


def test_declaration_errors_become_one_broken_dag_and_others_load() -> None:
    res = build_dags(
        [table("ok", {"rewrite-files": {}})],
        load_factories(),
        catalogs=CATALOGS,
        declaration_errors=["tables.yaml: tables[1] (table lake.db.bad): boom"],
    )
    assert "tms__lake.db.ok__rewrite-files" in res.dags
    broken = res.dags[BROKEN_DAG_ID]
    with pytest.raises(InvalidDeclaration, match="lake.db.bad"):
        broken.validate()


def test_on_new_snapshot_adds_the_gate_and_event_trigger_adds_a_watcher() -> None:
    t = table("ev", {"rewrite-files": {"trigger": "event", "poll-interval": "2s"}, "expire-snapshots": {}})
    res = build_dags([t], load_factories(), catalogs=CATALOGS)
    rf = res.dags["tms__lake.db.ev__rewrite-files"]
    assert [tk.task_id for tk in rf.topological_sort()] == ["check_snapshot", "maintain"]
    assert type(rf.timetable).__name__ == "AssetOrTimeSchedule"
    asset = rf.timetable.asset_condition
    [watcher] = asset.watchers
    classpath, kwargs = watcher.trigger.serialize()
    assert classpath == "airflow_tablemgmt.triggers.snapshot.TableSnapshotTrigger"
    assert kwargs["table_id"] == "lake.db.ev" and kwargs["poll_interval"] == 2.0
    assert kwargs["min_interval"] == 3600.0 and kwargs["data_changes_only"] is True  # rewrite-files: 1h
    assert asset.name == "tablemgmt.lake.db.ev.rewrite-files"
    fallback = rf.timetable.timetable
    assert type(fallback).__name__ == "DeltaTriggerTimetable" and fallback.delta == timedelta(days=1)
    es = res.dags["tms__lake.db.ev__expire-snapshots"]
    assert [tk.task_id for tk in es.tasks] == ["maintain"]  # not snapshot-driven by default


def test_event_trigger_without_catalog_is_a_named_error() -> None:
    res = build_dags([table("ev", {"rewrite-files": {"trigger": "event"}})], load_factories())
    assert "tms__lake.db.ev__rewrite-files" not in res.dags
    assert any("lake.db.ev" in e and "catalog" in e for e in res.errors)


def test_task_settings_reach_every_task_and_airflow_config_is_honoured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # build_dags reads these two settings once per parse instead of once per DAG; the values must
    # still be the configured ones.
    monkeypatch.setenv("AIRFLOW__CORE__MAX_CONSECUTIVE_FAILED_DAG_RUNS_PER_DAG", "3")
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DISABLE_BUNDLE_VERSIONING", "True")
    t = table(
        "cfg", {"rewrite-files": {"interval": "2h", "retries": 4}}, owner="team-b", priority=9, queue="q1"
    )
    res = build_dags([t], load_factories(), catalogs=CATALOGS)
    dag = res.dags["tms__lake.db.cfg__rewrite-files"]
    assert dag.max_consecutive_failed_dag_runs == 3 and dag.disable_bundle_versioning is True
    for task in dag.tasks:
        assert (task.owner, task.priority_weight, task.pool, task.retries) == ("team-b", 9, "q1", 4), task


@pytest.mark.parametrize(
    ("settings", "trigger", "gate", "fallback", "throttle_s"),
    [
        ({}, "event", True, "1d", 3600),  # snapshot-driven: the watcher by default
        ({"on-new-snapshot": False}, "schedule", False, None, None),  # not snapshot-driven: interval only
        ({"trigger": "schedule"}, "schedule", True, None, None),  # interval + gate task
        ({"interval": "*/15 * * * *"}, "event", True, "1d", 900),  # cron: throttle = smallest gap
        ({"interval": "@weekly"}, "event", True, "@weekly", 7 * 86400),  # longer than a day: its own fallback
        ({"fallback-interval": "6h"}, "event", True, "6h", 3600),
    ],
)
def test_schedule_plan_defaults(
    settings: dict, trigger: str, gate: bool, fallback: str | None, throttle_s: int | None
) -> None:
    from airflow_tablemgmt.dag_factory import SchedulePlan
    from airflow_tablemgmt.factories.iceberg import IcebergProcessFactory

    t = table("plan", {"rewrite-files": settings})
    strategy = IcebergProcessFactory().trigger_strategy(t.format, "rewrite-files")
    plan = SchedulePlan.resolve(t.action_settings("rewrite-files"), strategy)
    assert (plan.trigger, plan.gate) == (trigger, gate)
    assert (str(plan.fallback) if plan.fallback else None) == fallback
    if throttle_s is not None:
        assert plan.interval.min_spacing() == timedelta(seconds=throttle_s)
    dag = build_dags([t], load_factories(), catalogs=CATALOGS).dags["tms__lake.db.plan__rewrite-files"]
    kind = type(dag.timetable).__name__
    assert kind == ("AssetOrTimeSchedule" if trigger == "event" else "DeltaTriggerTimetable")
    assert [tk.task_id for tk in dag.topological_sort()] == (
        ["check_snapshot", "maintain"] if gate else ["maintain"]
    )


def test_non_snapshot_actions_stay_on_their_interval_and_bad_fallback_is_named() -> None:
    t = table("plain", {"expire-snapshots": {}, "delete-orphans": {}})
    res = build_dags([t], load_factories(), catalogs=CATALOGS)
    for dag in res.dags.values():
        assert type(dag.timetable).__name__ == "DeltaTriggerTimetable"
    with pytest.raises(InvalidDeclaration, match="fallback-interval"):
        table("bad", {"rewrite-files": {"fallback-interval": "soon"}})
