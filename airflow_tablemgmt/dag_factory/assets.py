"""The assets a table's DAGs are scheduled on: the table's watched snapshot asset (one watcher per
table, whatever number of its actions react to new snapshots), and a dynamic table's refresh asset
that ``freshness: downstream`` tables follow."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import Asset, AssetAny, AssetWatcher

from airflow_tablemgmt.core.actions import ActionSettings
from airflow_tablemgmt.core.schedule import SchedulePlan
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.factories.discovery import FactoryRegistry

REFRESH = "refresh"


def event_plans(
    table: TableSpec,
    factories: FactoryRegistry,
    action_settings: list[tuple[str, ActionSettings]] | None = None,
) -> dict[str, SchedulePlan]:
    """The table's event-driven actions and their plans (sorted by action), i.e. what its watcher serves.

    ``action_settings``: ``table.enabled_action_settings()``, when the caller has it already."""
    plans: dict[str, SchedulePlan] = {}
    if action_settings is None:
        action_settings = table.enabled_action_settings()
    for action, settings in action_settings:
        strategy = factories.for_action(table.format, action).trigger_strategy(table.format, action)
        plan = SchedulePlan.resolve(settings, strategy)
        if plan.trigger == "event":
            plans[action] = plan
    return dict(sorted(plans.items()))


def table_asset(table: TableSpec, catalog: CatalogSpec, plans: dict[str, SchedulePlan]) -> Asset:
    """The table's asset, whose one watcher polls the table's current snapshot inside the triggerer.

    One asset and one trigger per table, however many of its actions react to new snapshots: Airflow's
    triggerer runs at most ``[triggerer] capacity`` triggers (1,000 by default), and Airflow stores one
    ``trigger`` row per distinct (classpath, kwargs), so a per-(table, action) watcher would cost one
    trigger per action. The trigger polls at the shortest of the actions' poll intervals and keeps
    each action's throttle (``min_interval`` = its interval) and remembered snapshot apart; its event
    names the actions it is for, and every action DAG of the table is scheduled on this asset, its
    ``maintain`` task's event gate (:func:`~airflow_tablemgmt.operators.gate.check_event`) skipping
    events that are not for it.

    Built from the table's whole action set, never from one action, so a task start (which builds
    one DAG) produces the same asset as the DAG processor's full parse.
    """
    return Asset(
        name=f"tablemgmt.{table.id}",
        uri=f"tablemgmt://{table.catalog}/{table.namespace}/{table.name}",
        group="tablemgmt",
        watchers=[table_watcher(table, catalog, plans)],
    )


def table_watcher(table: TableSpec, catalog: CatalogSpec, plans: dict[str, SchedulePlan]) -> AssetWatcher:
    """The one snapshot watcher of a table (see :func:`table_asset`), on whichever asset carries it."""
    from airflow_tablemgmt.triggers.format_readers import watched_catalog
    from airflow_tablemgmt.triggers.snapshot import TableSnapshotTrigger

    trigger = TableSnapshotTrigger(
        table_id=table.id,
        catalog=watched_catalog(catalog, table.format),
        poll_interval=min(plan.poll_interval for plan in plans.values()).total_seconds(),
        actions={action: plan.interval.min_spacing().total_seconds() for action, plan in plans.items()},
        data_changes_only=True,
    )
    return AssetWatcher(name=f"tablemgmt-snapshot-{table.id}", trigger=trigger)


def policy_asset(
    policy: str, watched: Iterable[tuple[TableSpec, CatalogSpec, dict[str, SchedulePlan]]]
) -> Asset | None:
    """The asset a policy's event-driven planned DAGs (``tms__plan__<policy>__<action>``) are scheduled on:
    one watcher per enrolled table with event-driven actions, the same trigger a declared table gets
    (so the same shared per-catalog poll, throttles and remembered state), each event naming its table and
    the actions it is due for. ``watched``: (table, catalog, :func:`event_plans` of the table) per
    enrolled table; None when no table has an event-driven action. A plan run started by events plans
    only the tables they name for its action (:func:`tables_of_events`).

    One asset per policy, not per (policy, action): a table's watcher then has exactly one asset (its
    remembered state stays in that asset's store), and Airflow coalesces the events that arrive while a
    plan run is active into the next run."""
    watchers = [table_watcher(t, c, plans) for t, c, plans in watched if plans]
    if not watchers:
        return None
    # No ``tablemgmt://`` URI: that scheme names one table (assets/uri.py); the name is the URI.
    return Asset(name=policy_asset_name(policy), group="tablemgmt", watchers=watchers)


def policy_asset_name(policy: str) -> str:
    """The name (and URI) of :func:`policy_asset`."""
    return f"tablemgmt.policy.{policy}"


def tables_of_events(triggering_asset_events: Mapping[Any, Iterable[Any]], action: str) -> list[str] | None:
    """The tables a plan run's snapshot events ask ``action`` for, sorted; None for a run without events
    (its time-based schedule, a manual run: plan every table). An event without ``actions`` is for all."""
    tables: set[str] = set()
    seen = False
    for events in triggering_asset_events.values():
        for event in events:
            seen = True
            extra = getattr(event, "extra", None) or {}
            payload = extra.get("payload") if isinstance(extra, dict) else None
            if not isinstance(payload, dict) or not isinstance(payload.get("table"), str):
                continue
            actions = payload.get("actions")
            if actions is None or action in actions:
                tables.add(payload["table"])
    return sorted(tables) if seen else None


def refresh_asset(table_id: str) -> Asset:
    """The asset a dynamic table's refresh task updates (Airflow emits it when the task succeeds,
    a NO_DATA refresh included); ``freshness: downstream`` tables are scheduled on their upstreams'."""
    catalog, *levels, name = table_id.split(".")  # a namespace of several levels keeps its dots (a.b)
    return Asset(
        name=f"tablemgmt.refresh.{table_id}",
        uri=f"tablemgmt://{catalog}/{'.'.join(levels)}/{name}/refresh",
        group="tablemgmt",
    )


def after_refreshes(upstream: Iterable[str], dynamic_ids: Mapping[str, str] | None = None) -> Any:
    """The schedule of a ``freshness: downstream`` table: any upstream's refresh.

    ``upstream`` lists every table the query names (see ``DynamicTableSpec.table_spec``);
    ``dynamic_ids`` (lower-cased id -> id of every registered dynamic table), when the caller has the
    whole registry, keeps only dynamic tables, spelled as registered. Without it, or when none of
    them is registered (yet), all of ``upstream`` (an asset nobody emits never starts a run).
    """
    ids = sorted(set(upstream))
    if dynamic_ids is not None:
        known = sorted({dynamic_ids[u.lower()] for u in ids if u.lower() in dynamic_ids})
        ids = known or ids
    assets = [refresh_asset(u) for u in ids]
    return assets[0] if len(assets) == 1 else AssetAny(*assets)


def watcher_capacity_warning(watchers: int, capacity: int, triggerers: int = 1) -> str | None:
    """The warning for more snapshot watchers than ``triggerers`` triggerers of ``capacity`` run
    (None when they fit)."""
    if watchers <= capacity * triggerers:
        return None
    needed = -(-watchers // capacity)
    return (
        f"tablemgmt: {watchers} snapshot watchers (one per table with event-driven actions) exceed "
        f"[triggerer] capacity = {capacity} x [tablemgmt] triggerers = {triggerers}: a triggerer runs at "
        f"most {capacity} triggers, the rest wait unassigned and their tables are reached only by their "
        f"fallback schedule. Run at least {needed} triggerers and set [tablemgmt] triggerers to their "
        "number, or raise [triggerer] capacity (deferred tasks share it too); see the README's sizing rule."
    )


def watchers_of(dags: Iterable[Any]) -> int:
    """Snapshot watchers the DAGs' schedules carry (distinct assets with a watcher)."""
    names: set[str] = set()
    stack = [getattr(getattr(d, "timetable", None), "asset_condition", None) for d in dags]
    while stack:
        cond = stack.pop()
        if cond is None:
            continue
        if getattr(cond, "watchers", None):
            names.add(cond.name)
        stack.extend(getattr(cond, "objects", ()) or ())
    return len(names)
