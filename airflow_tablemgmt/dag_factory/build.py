"""Registry -> DAG objects: one DAG per (table, enabled action).

A pure function of the registry and the factories. No network and no Spark at parse time; one
registry read; when Airflow says which DAG it is about to run (``get_parsing_context()``) only that
one is built. A broken declaration becomes an import error naming the table, and every other DAG
still loads.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Asset, AssetOrTimeSchedule

from airflow_tablemgmt.core.actions import ActionSettings, RefreshSettings
from airflow_tablemgmt.core.durations import format_duration, to_timedelta
from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.naming import BROKEN_DAG_ID, dag_id_for, parse_dag_id
from airflow_tablemgmt.core.schedule import SchedulePlan
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.core.time_limits import (
    REFRESH_TIMEOUT_MAX,
    TimeLimit,
    dagrun_timeout,
    maintenance_time_limit,
    refresh_time_limit,
)
from airflow_tablemgmt.core.triggers import Freshness
from airflow_tablemgmt.dag_factory.assets import (
    REFRESH,
    after_refreshes,
    event_plans,
    refresh_asset,
    table_asset,
    watcher_capacity_warning,
)
from airflow_tablemgmt.dag_factory.result import BuildResult
from airflow_tablemgmt.dag_factory.timetables import START_DATE
from airflow_tablemgmt.dag_factory.timetables import timetable as _timetable
from airflow_tablemgmt.factories.discovery import FactoryRegistry
from airflow_tablemgmt.notifications.callback import on_task_failure
from airflow_tablemgmt.operators.maintenance import TableMaintenanceOperator

log = logging.getLogger(__name__)


class BrokenDeclarationsDAG(DAG):
    """Carries declaration errors into Airflow: DagBag validates every DAG it finds and records a
    failure as an import error of the file, while it keeps the file's other DAGs."""

    def validate(self) -> None:
        raise InvalidDeclaration(self.description or "invalid table declarations")


@dataclass(frozen=True)
class DagConfigDefaults:
    """Airflow settings a DAG would otherwise look up in the config on every construction.

    Each lookup walks the environment, the config file and the defaults, once per DAG; at thousands
    of DAGs that adds up to a visible share of parse time (``benchmarks/dag_parse.py``), so
    :func:`build_dags` reads them once and passes them in.
    """

    max_consecutive_failed_dag_runs: int = 0
    disable_bundle_versioning: bool = False
    # [tablemgmt] refresh_timeout / refresh_timeout_max / maintenance_timeout (core/time_limits.py)
    refresh_timeout: timedelta | None = None
    refresh_timeout_max: timedelta = REFRESH_TIMEOUT_MAX
    maintenance_timeout: timedelta | None = None
    #: Settings that could not be read (each names the option and what is allowed); their defaults apply.
    problems: tuple[str, ...] = ()

    @classmethod
    def from_airflow_config(cls) -> DagConfigDefaults:
        from airflow.sdk.configuration import conf

        problems: list[str] = []

        def duration(option: str, text: str | None) -> timedelta | None:
            if not text or not text.strip():
                return None
            try:
                return to_timedelta(text.strip())
            except ValueError as e:
                problems.append(f"[tablemgmt] {option}: {e}; its default applies")
                return None

        cap = duration("refresh_timeout_max", conf.get("tablemgmt", "refresh_timeout_max", fallback=""))
        return cls(
            max_consecutive_failed_dag_runs=conf.getint("core", "max_consecutive_failed_dag_runs_per_dag"),
            disable_bundle_versioning=conf.getboolean("dag_processor", "disable_bundle_versioning"),
            refresh_timeout=duration(
                "refresh_timeout", conf.get("tablemgmt", "refresh_timeout", fallback="")
            ),
            refresh_timeout_max=cap or REFRESH_TIMEOUT_MAX,
            maintenance_timeout=duration(
                "maintenance_timeout", conf.get("tablemgmt", "maintenance_timeout", fallback="")
            ),
            problems=tuple(problems),
        )

    def time_limit(self, action: str, settings: ActionSettings) -> TimeLimit:
        """The limit of one run of ``action`` with ``settings`` (core/time_limits.py)."""
        if isinstance(settings, RefreshSettings):
            freshness = Freshness.parse(settings.freshness).delta if settings.freshness else None
            return refresh_time_limit(
                freshness, settings.timeout, self.refresh_timeout, self.refresh_timeout_max
            )
        return maintenance_time_limit(settings.timeout, self.maintenance_timeout)


def build_dag(
    table: TableSpec,
    action: str,
    factories: FactoryRegistry,
    catalog: CatalogSpec | None = None,
    config: DagConfigDefaults | None = None,
    settings: ActionSettings | None = None,
    asset: Asset | None = None,
    dynamic_ids: Mapping[str, str] | None = None,
) -> DAG:
    """``asset``: the table's watched asset (:func:`table_asset`), when the caller already built it
    for the table's other actions. ``dynamic_ids``: see :func:`after_refreshes`."""
    config = config or DagConfigDefaults.from_airflow_config()
    table_id = table.id
    factory = factories.for_action(table.format, action)
    strategy = factory.trigger_strategy(table.format, action)
    settings = settings or table.action_settings(action)
    plan = SchedulePlan.resolve(settings, strategy)
    parallelism = settings.parallelism or strategy.parallelism
    schedule: Any
    if plan.trigger == "schedule":
        schedule = _timetable(plan.interval)
    elif plan.trigger == "upstream":
        assert isinstance(settings, RefreshSettings)
        schedule = after_refreshes(settings.upstream, dynamic_ids)
    else:
        if catalog is None:
            raise InvalidDeclaration(
                f"table {table_id}: event-driven {action} needs its catalog {table.catalog!r}"
            )
        assert plan.fallback is not None
        if asset is None:
            asset = table_asset(table, catalog, event_plans(table, factories))
        schedule = AssetOrTimeSchedule(timetable=_timetable(plan.fallback), assets=asset)
    dag_id = dag_id_for(table_id, action)
    when = plan.describe()
    limit = config.time_limit(action, settings)
    # Given to each task directly rather than as the DAG's default_args: merging default_args
    # deep-copies them once per task, which is measurable at 10,000 DAGs.
    task_args: dict[str, Any] = {
        "owner": table.owner,
        "retries": settings.retries,
        "retry_delay": settings.retry_delay,
        "priority_weight": table.priority,
        # A run ends at its limit (core/time_limits.py); the operator names it in the failure reason.
        "execution_timeout": limit.limit,
        # [tablemgmt] notify / the table's notify: (docs/notifications.md), decided when a failure happens.
        "on_failure_callback": on_task_failure,
    }
    if table.queue != "default":
        task_args["pool"] = table.queue
    if action == REFRESH:
        # A dynamic table's refresh: downstream dynamic tables are scheduled on this asset.
        task_args["outlets"] = [refresh_asset(table_id)]
    with DAG(
        dag_id=dag_id,
        schedule=schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        max_active_tasks=parallelism,
        dagrun_timeout=dagrun_timeout(
            limit.limit, settings.retries, settings.retry_delay, settings.lease_wait
        ),
        max_consecutive_failed_dag_runs=config.max_consecutive_failed_dag_runs,
        disable_bundle_versioning=config.disable_bundle_versioning,
        tags=["tablemgmt", table_id, action, str(table.format)],
        description=f"{action} on {table_id}: {when}",
        doc_md=(
            f"Maintenance of `{table_id}` ({table.format}): **{action}** {when}.\n\n"
            f"Declared settings: `{table.actions.get(action) or {}}`\n\n"
            f"Time limit per run: {format_duration(limit.limit)} ({limit.source})"
        ),
        is_paused_upon_creation=False,
        # The DAG file puts every DAG in its module namespace (register_dags), where DagBag finds it;
        # auto-registering it as well would hash each DAG once more (its schedule's repr) on exit.
        auto_register=False,
    ) as dag:
        # One task: the snapshot gate (and an event-driven run's "is this event for me") is the
        # start of maintain, not a task of its own: a second operator per DAG was about a third of
        # a full parse, and a second task start per run with work.
        TableMaintenanceOperator(
            task_id="maintain",
            table=table_id,
            action=action,
            lease_wait=settings.lease_wait,
            timeout_source=limit.source,
            gate=("event" if plan.trigger == "event" else "snapshot") if plan.gate else None,
            **task_args,
        )
    return dag


def triggerer_slots() -> tuple[int, int]:
    """``[triggerer] capacity`` and how many triggerers run (``[tablemgmt] triggerers``, default 1:
    Airflow does not tell a DAG file how many triggerers are alive)."""
    from airflow.sdk.configuration import conf

    return conf.getint("triggerer", "capacity", fallback=1000), conf.getint(
        "tablemgmt", "triggerers", fallback=1
    )


@contextmanager
def cyclic_gc_paused(freeze_if: Callable[[], bool] | None = None) -> Iterator[None]:
    """Building thousands of DAGs allocates millions of long-lived objects and no garbage; the
    cyclic collector would rescan them over and over (a share of the build that grows with the
    registry; ``benchmarks/dag_parse.py`` times full parses).

    ``freeze_if`` (asked on the way out): move everything allocated so far to the collector's permanent generation
    (``gc.freeze()``), so the collections that follow (DagBag, serialization) do not rescan the DAGs
    either. Those objects are then only freed by reference counting, which is what the processes
    that parse a DAG file want: Airflow's DAG processor and task runners parse once and exit.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze_if is not None and freeze_if():
            gc.freeze()  # before enabling: the next allocation would otherwise start a collection
        if was_enabled:
            gc.enable()


# A full parse of at least this many DAGs freezes them (see cyclic_gc_paused); smaller ones, as in
# tests that build registries over and over in one process, leave the collector as it was.
FREEZE_AT_DAGS = 1000


def dynamic_table_ids(tables: Iterable[TableSpec]) -> dict[str, str] | None:
    """Lower-cased id -> id of every dynamic table (a table with ``refresh``), when some dynamic
    table is scheduled after its upstreams; else None (nothing to look up)."""
    dynamic = [t for t in tables if REFRESH in t.actions]
    if not any(t.actions[REFRESH].get("trigger") == "upstream" for t in dynamic):
        return None
    return {t.id.lower(): t.id for t in dynamic}


def build_dags(
    tables: Iterable[TableSpec],
    factories: FactoryRegistry,
    *,
    only_dag_id: str | None = None,
    declaration_errors: Iterable[str] = (),
    catalogs: dict[str, CatalogSpec] | None = None,
    prebuilt: Mapping[str, int] | None = None,
) -> BuildResult:
    """Build every (table, enabled action) DAG, or only ``only_dag_id``. Errors are collected per
    table, never raised, and surface as one :class:`BrokenDeclarationsDAG`.

    ``prebuilt``: table id -> its snapshot watchers, for tables whose DAGs the caller already has
    (``dag_factory.cache``): not built here, but still seen by dynamic tables and the capacity warning."""
    result = BuildResult(errors=list(declaration_errors))
    config = DagConfigDefaults.from_airflow_config()
    result.errors.extend(config.problems)
    result.errors.extend(
        f"process factory plugin {name!r} failed to load: {err}" for name, err in factories.errors.items()
    )
    wanted = parse_dag_id(only_dag_id) if only_dag_id else None
    watchers = 0
    if wanted is None:
        tables = list(tables)
    dynamic_ids = dynamic_table_ids(tables) if wanted is None else None
    with cyclic_gc_paused(freeze_if=lambda: wanted is None and len(result.dags) >= FREEZE_AT_DAGS):
        for table in tables:
            table_id = table.id
            if (wanted is not None and table_id != wanted[0]) or (prebuilt and table_id in prebuilt):
                continue
            catalog = (catalogs or {}).get(table.catalog)
            asset = None
            action_settings = table.enabled_action_settings()  # validates each action's settings
            try:
                plans = event_plans(table, factories, action_settings)
                if plans and catalog is not None:
                    asset = table_asset(table, catalog, plans)
                    watchers += 1
            except Exception:  # noqa: BLE001 - build_dag below reports this table's error per action
                pass
            for action, settings in action_settings:
                if wanted is not None and action != wanted[1]:
                    continue
                try:
                    dag = build_dag(table, action, factories, catalog, config, settings, asset, dynamic_ids)
                except Exception as e:  # noqa: BLE001 - one bad table must not hide the others
                    result.errors.append(f"table {table_id}, action {action}: {type(e).__name__}: {e}")
                    continue
                result.dags[dag.dag_id] = dag
    if wanted is None and only_dag_id is None:
        # Airflow itself only says so at INFO, per triggerer loop ("reached the maximum capacity"),
        # and a trigger left unassigned never runs, so it cannot say it either: the full parse can.
        warning = watcher_capacity_warning(watchers + sum((prebuilt or {}).values()), *triggerer_slots())
        if warning:
            log.warning(warning)
    if result.errors and (only_dag_id is None or only_dag_id == BROKEN_DAG_ID):
        broken = BrokenDeclarationsDAG(
            dag_id=BROKEN_DAG_ID,
            schedule=None,
            start_date=START_DATE,
            description="\n".join(result.errors),
            tags=["tablemgmt"],
        )
        result.dags[BROKEN_DAG_ID] = broken
    return result
