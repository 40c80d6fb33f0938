import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.naming import BROKEN_DAG_ID, dag_id_for, parse_dag_id
from airflow_tablemgmt.core.tables import CatalogSpec, parse_table
from airflow_tablemgmt.dag_factory.build import build_dags
from airflow_tablemgmt.factories.discovery import load_factories

CATALOGS = {"lake": CatalogSpec(name="lake", warehouse="/tmp/wh")}


def table(name: str, actions: dict, **kw: object):  # type: ignore[no-untyped-def]
    return parse_table({"catalog": "lake", "namespace": "db", "name": name, "actions": actions, **kw})


def test_one_dag_per_enabled_action_with_ids_tags_and_schedule() -> None:
    t = table(
        "events",
        {
            "rewrite-files": {"interval": "0 3 * * *", "trigger": "schedule"},
            "expire-snapshots": {},
            "delete-orphans": {"enabled": False},
        },
        owner="team-a",
        priority=7,
        queue="maint",
    )
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
    # One task: maintain makes the gate's checks itself (the event's actions, then the snapshot).
    assert [tk.task_id for tk in rf.tasks] == ["maintain"] and rf.get_task("maintain").gate == "event"
    assert type(rf.timetable).__name__ == "AssetOrTimeSchedule"
    asset = rf.timetable.asset_condition
    [watcher] = asset.watchers
    classpath, kwargs = watcher.trigger.serialize()
    assert classpath == "airflow_tablemgmt.triggers.snapshot.TableSnapshotTrigger"
    assert kwargs["table_id"] == "lake.db.ev" and kwargs["poll_interval"] == 2.0
    assert kwargs["actions"] == {"rewrite-files": 3600.0}  # rewrite-files' throttle: its interval, 1h
    assert kwargs["data_changes_only"] is True
    assert asset.name == "tablemgmt.lake.db.ev"
    fallback = rf.timetable.timetable
    assert type(fallback).__name__ == "DeltaTriggerTimetable" and fallback.delta == timedelta(days=1)
    es = res.dags["tms__lake.db.ev__expire-snapshots"]
    assert [tk.task_id for tk in es.tasks] == ["maintain"]  # not snapshot-driven by default
    assert es.get_task("maintain").gate is None


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
    from airflow_tablemgmt.core.schedule import SchedulePlan
    from airflow_tablemgmt.formats.iceberg.factory import IcebergProcessFactory

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
    [task] = dag.tasks
    assert task.task_id == "maintain"
    assert task.gate == (("event" if trigger == "event" else "snapshot") if gate else None)


def test_non_snapshot_actions_stay_on_their_interval_and_bad_fallback_is_named() -> None:
    t = table("plain", {"expire-snapshots": {}, "delete-orphans": {}})
    res = build_dags([t], load_factories(), catalogs=CATALOGS)
    for dag in res.dags.values():
        assert type(dag.timetable).__name__ == "DeltaTriggerTimetable"
    with pytest.raises(InvalidDeclaration, match="fallback-interval"):
        table("bad", {"rewrite-files": {"fallback-interval": "soon"}})


SNAPSHOT_DRIVEN = ("rewrite-files", "rewrite-deletes", "rewrite-manifests", "compute-stats")


def _watcher_triggers(dags: Iterable[Any]) -> dict[int, tuple[str, dict[str, Any]]]:
    """Every watcher trigger of ``dags`` as Airflow stores it: one ``trigger`` row per distinct
    (classpath, kwargs) hash (``add_asset_trigger_references`` deduplicates by that hash)."""
    from airflow.serialization.encoders import encode_trigger
    from airflow.triggers.base import BaseEventTrigger

    found: dict[int, tuple[str, dict[str, Any]]] = {}
    for dag in dags:
        condition = getattr(dag.timetable, "asset_condition", None)
        for watcher in getattr(condition, "watchers", None) or []:
            encoded = encode_trigger(watcher.trigger)
            found[BaseEventTrigger.hash(encoded["classpath"], encoded["kwargs"])] = (
                encoded["classpath"],
                watcher.trigger.serialize()[1],
            )
    return found


def test_one_watcher_trigger_per_table_however_many_actions_react() -> None:
    actions = {name: {"poll-interval": "5s"} for name in SNAPSHOT_DRIVEN}
    actions["rewrite-files"] = {"poll-interval": "3s"}
    actions["compute-stats"] = {"poll-interval": "20s", "interval": "6h"}
    tables = [table(f"w{i}", {**actions, "expire-snapshots": {}}) for i in range(3)]
    res = build_dags(tables, load_factories(), catalogs=CATALOGS)
    assert res.errors == []
    triggers = _watcher_triggers(res.dags.values())
    assert len(triggers) == 3  # one per table, not one per (table, action)
    by_table = {kwargs["table_id"]: kwargs for _, kwargs in triggers.values()}
    w0 = by_table["lake.db.w0"]
    # One poll, at the shortest poll interval; each action keeps its own throttle (its interval).
    assert w0["poll_interval"] == 3.0 and w0["data_changes_only"] is True
    assert w0["actions"] == {
        "compute-stats": 6 * 3600.0,
        "rewrite-deletes": 3600.0,
        "rewrite-files": 3600.0,
        "rewrite-manifests": 86400.0,
    }
    # The four DAGs are scheduled on the one table asset, beside their own fallback schedule.
    assets = {
        dag_id: res.dags[dag_id].timetable.asset_condition
        for dag_id in (dag_id_for("lake.db.w1", a) for a in SNAPSHOT_DRIVEN)
    }
    assert {(a.name, a.uri) for a in assets.values()} == {("tablemgmt.lake.db.w1", "tablemgmt://lake/db/w1")}
    assert type(res.dags[dag_id_for("lake.db.w1", "expire-snapshots")].timetable).__name__ == (
        "DeltaTriggerTimetable"
    )
    # A task start builds only its DAG, and its asset must be the very same watcher (else every
    # task start would look like a changed asset definition).
    alone = build_dags(
        tables, load_factories(), only_dag_id=dag_id_for("lake.db.w1", "rewrite-manifests"), catalogs=CATALOGS
    )
    assert _watcher_triggers(alone.dags.values()).keys() <= triggers.keys()
    assert len(_watcher_triggers(alone.dags.values())) == 1


def test_watchers_past_the_triggerer_capacity_are_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AIRFLOW__TRIGGERER__CAPACITY", "4")
    tables = [table(f"c{i}", {name: {} for name in SNAPSHOT_DRIVEN}) for i in range(4)]
    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt.dag_factory"):
        build_dags(tables, load_factories(), catalogs=CATALOGS)
    assert not [r for r in caplog.records if "capacity" in r.getMessage()]  # 4 watchers fit 4

    tables.append(table("c4", {"rewrite-files": {}}))
    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt.dag_factory"):
        build_dags(tables, load_factories(), catalogs=CATALOGS)
    [record] = [r for r in caplog.records if "capacity" in r.getMessage()]
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert "5 snapshot watchers" in message and "[triggerer] capacity = 4" in message
    assert "at least 2 triggerers" in message  # the sizing rule: ceil(watchers / capacity)

    # Two triggerers declared: 5 watchers fit 2 x 4, nothing to say.
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__TRIGGERERS", "2")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt.dag_factory"):
        build_dags(tables, load_factories(), catalogs=CATALOGS)
    assert not [r for r in caplog.records if "capacity" in r.getMessage()]


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ({}, True),  # a time-based (fallback) run: the snapshot gate alone decides
        ({"a": [{"from_trigger": True, "payload": {"table": "t", "actions": {"rewrite-files": 1}}}]}, True),
        ({"a": [{"from_trigger": True, "payload": {"table": "t", "actions": {"compute-stats": 1}}}]}, False),
        ({"a": [{"from_trigger": True, "payload": {"table": "t", "snapshot_id": 3}}]}, True),  # older watcher
        ({"a": [{"payload": {"actions": {"x": 1}}}, {"payload": {"actions": {"rewrite-files": 2}}}]}, True),
    ],
)
def test_a_watcher_event_starts_only_the_actions_it_names(events: dict, expected: bool) -> None:
    from airflow_tablemgmt.operators.gate import event_names_action

    class Event:
        def __init__(self, extra: dict) -> None:
            self.extra = extra

    triggering = {asset: [Event(extra) for extra in extras] for asset, extras in events.items()}
    assert event_names_action(triggering, "rewrite-files") is expected


def test_maintain_skips_an_action_the_event_does_not_name_before_reading_anything() -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    t = table("sk", {name: {} for name in SNAPSHOT_DRIVEN})
    dag = build_dags([t], load_factories(), catalogs=CATALOGS).dags[dag_id_for("lake.db.sk", "compute-stats")]
    maintain = dag.get_task("maintain")

    class Event:
        extra = {"from_trigger": True, "payload": {"table": "lake.db.sk", "actions": {"rewrite-files": 7}}}

    # Held back by compute-stats' own throttle: skipped before the store or the table is read (the
    # task's connection names no store here, so reading one would fail, not skip).
    with pytest.raises(AirflowSkipException, match="event is for rewrite-files; compute-stats is not due"):
        maintain.execute({"triggering_asset_events": {"tablemgmt.lake.db.sk": [Event()]}})


def test_maintain_refuses_an_unknown_gate() -> None:
    from airflow_tablemgmt.operators.maintenance import TableMaintenanceOperator

    with pytest.raises(ValueError, match="gate: must be one of 'snapshot', 'event' or None, not 'always'"):
        TableMaintenanceOperator(task_id="maintain", table="lake.db.t", action="rewrite-files", gate="always")


def _plain_dag(fast: Any) -> Any:
    """The DAG ``fast`` (a factory DAG) built the straightforward way: DAG() reading its defaults
    from the config and auto-registering, the operator given every setting the factory gave."""
    from datetime import UTC, datetime

    from airflow.sdk import DAG

    from airflow_tablemgmt.operators.maintenance import TableMaintenanceOperator

    m = fast.get_task("maintain")
    with DAG(
        dag_id=fast.dag_id,
        schedule=fast.timetable,
        start_date=datetime(2024, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        max_active_tasks=fast.max_active_tasks,
        tags=sorted(fast.tags),
        description=fast.description,
        doc_md=fast.doc_md,
        is_paused_upon_creation=False,
        dagrun_timeout=fast.dagrun_timeout,
    ) as dag:
        TableMaintenanceOperator(
            task_id="maintain",
            table=m.table,
            action=m.action,
            lease_wait=m.lease_wait,
            gate=m.gate,
            execution_timeout=m.execution_timeout,
            timeout_source=m.timeout_source,
            owner=m.owner,
            retries=m.retries,
            retry_delay=m.retry_delay,
            priority_weight=m.priority_weight,
            on_failure_callback=m.on_failure_callback,
            **({"pool": m.pool} if m.pool != "default_pool" else {}),
            **({"outlets": m.outlets} if m.outlets else {}),
        )
    dag.fileloc = fast.fileloc  # where the DAG was built; DagBag sets it to the DAG file's path
    return dag


def test_factory_dags_serialize_as_the_straightforward_construction_does() -> None:
    """What the factory saves per DAG (config read once, no auto-registration, a pendulum start
    date, one task) must not change what Airflow serializes, for every kind of DAG it builds."""
    from airflow.serialization.serialized_objects import DagSerialization

    from airflow_tablemgmt.core.dynamic import parse_dynamic_table

    tables = [
        table("ev", {"rewrite-files": {"poll-interval": "3s"}, "compute-stats": {"interval": "6h"}}),
        table(
            "sc", {"rewrite-files": {"trigger": "schedule", "interval": "0 3 * * *"}, "expire-snapshots": {}}
        ),
        table(
            "pl",
            {"rewrite-manifests": {"on-new-snapshot": False}, "delete-orphans": {"retries": 3}},
            owner="team-c",
            priority=5,
            queue="maint",
        ),
    ]
    dynamic = [
        parse_dynamic_table(
            {"identifier": "lake.db.dt_a", "freshness": "5 MINUTE", "query": "SELECT * FROM lake.db.ev"}
        ),
        parse_dynamic_table(
            {"identifier": "lake.db.dt_b", "freshness": "downstream", "query": "SELECT * FROM lake.db.dt_a"}
        ),
    ]
    specs = [*tables, *(d.table_spec() for d in dynamic)]
    result = build_dags(specs, load_factories(), catalogs=CATALOGS)
    assert result.errors == []
    kinds = {(type(d.timetable).__name__, d.get_task("maintain").gate) for d in result.dags.values()}
    assert kinds >= {
        ("AssetOrTimeSchedule", "event"),
        ("CronTriggerTimetable", "snapshot"),
        ("DeltaTriggerTimetable", None),
        ("AssetTriggeredTimetable", None),  # a refresh after its upstream's
    }, kinds
    for dag in result.dags.values():
        assert DagSerialization.to_dict(dag) == DagSerialization.to_dict(_plain_dag(dag)), dag.dag_id


def test_watchers_of_one_catalog_each_keep_their_own_checked_catalog() -> None:
    """The catalog's checked JSON form is computed once per catalog object for all its watchers; each
    trigger still owns its kwargs, and a catalog with a plaintext secret is refused every time."""
    from airflow_tablemgmt.triggers.snapshot import TableSnapshotTrigger

    lake = CatalogSpec(name="lake", warehouse="/tmp/wh", properties={"token": "env:TMS_TOKEN"})
    a, b = (TableSnapshotTrigger(table_id=f"lake.db.{n}", catalog=lake) for n in ("a", "b"))
    assert a.catalog == b.catalog == lake.model_dump(mode="json", by_alias=True)
    a.catalog["properties"]["token"] = "changed"
    a.catalog["warehouse"] = "/elsewhere"
    assert b.catalog == TableSnapshotTrigger(table_id="lake.db.c", catalog=lake).catalog
    assert b.catalog["properties"] == {"token": "env:TMS_TOKEN"} and b.catalog["warehouse"] == "/tmp/wh"
    plain = lake.model_copy(update={"properties": {"token": "s3cr3t"}})  # as if resolved: not a reference
    for _ in range(2):
        with pytest.raises(InvalidDeclaration, match="token"):
            TableSnapshotTrigger(table_id="lake.db.a", catalog=plain)
