"""Events for policy-enrolled tables (ADR 0004 decision 5): one asset per policy whose watchers are the
enrolled tables' own snapshot watchers, and a plan run started by events plans only the tables they name for
its action. No JVM, no triggerer."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from airflow_tablemgmt.core.tables import CatalogSpec, parse_table
from airflow_tablemgmt.dag_factory.assets import event_plans, policy_asset, table_asset, tables_of_events
from airflow_tablemgmt.factories.discovery import load_factories

LAKE = CatalogSpec(name="lake", warehouse="/tmp/wh")


def table(name: str, actions: dict[str, Any]):  # type: ignore[no-untyped-def]
    return parse_table({"catalog": "lake", "namespace": "db", "name": name, "actions": actions})


def test_a_policy_asset_carries_each_enrolled_tables_own_watcher() -> None:
    factories = load_factories()
    tables = [
        table("a", {"rewrite-files": {}, "expire-snapshots": {}}),
        table("b", {"rewrite-files": {"poll-interval": "5s"}, "compute-stats": {}}),
        table("c", {"expire-snapshots": {}}),  # nothing event-driven: no watcher
    ]
    watched = [(t, LAKE, event_plans(t, factories)) for t in tables]
    asset = policy_asset("nightly", watched)
    assert asset is not None and asset.name == "tablemgmt.policy.nightly"
    by_table = {w.trigger.table_id: w.trigger for w in asset.watchers}
    assert sorted(by_table) == ["lake.db.a", "lake.db.b"]
    # The same trigger (classpath and kwargs) a declared table's asset gets: one stored trigger per table.
    assert (
        by_table["lake.db.a"].serialize()
        == table_asset(tables[0], LAKE, watched[0][2]).watchers[0].trigger.serialize()
    )
    assert by_table["lake.db.a"].poll_interval == 1.0  # the default
    assert sorted(by_table["lake.db.b"].actions) == ["compute-stats", "rewrite-files"]
    assert policy_asset("nightly", [(tables[2], LAKE, watched[2][2])]) is None


def event(payload: dict[str, Any]) -> Any:
    return SimpleNamespace(extra={"from_trigger": True, "payload": payload})


def test_a_plan_run_plans_the_tables_its_events_name_for_its_action() -> None:
    events = {
        "tablemgmt.policy.nightly": [
            event(
                {"table": "lake.db.a", "snapshot_id": 2, "actions": {"rewrite-files": 1, "compute-stats": 1}}
            ),
            event({"table": "lake.db.b", "snapshot_id": 5, "actions": {"compute-stats": 4}}),
            event({"table": "lake.db.a", "snapshot_id": 3, "actions": {"rewrite-files": 2}}),
            event({"table": "lake.db.c", "snapshot_id": 7}),  # names no actions: for every action
        ]
    }
    assert tables_of_events(events, "rewrite-files") == ["lake.db.a", "lake.db.c"]
    assert tables_of_events(events, "compute-stats") == ["lake.db.a", "lake.db.b", "lake.db.c"]
    assert tables_of_events(events, "rewrite-manifests") == ["lake.db.c"]
    assert tables_of_events({}, "rewrite-files") is None  # a scheduled or manual run: every table
    only_others = {"x": [event({"table": "lake.db.b", "actions": {"compute-stats": 4}})]}
    assert tables_of_events(only_others, "rewrite-files") == []  # events, none for this action
