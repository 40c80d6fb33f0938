"""Registry -> DAG objects: one DAG per (table, enabled action).

A pure function of the registry and the factories. No network and no Spark at parse time; one
registry read; when Airflow says which DAG it is about to run (``get_parsing_context()``) only that
one is built. A broken declaration becomes an import error naming the table, and every other DAG
still loads.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import (
    DAG,
    Asset,
    AssetOrTimeSchedule,
    AssetWatcher,
    CronTriggerTimetable,
    DeltaTriggerTimetable,
)

from airflow_tablemgmt.core.actions import ActionSettings
from airflow_tablemgmt.core.errors import InvalidDeclaration, TableMgmtError
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy
from airflow_tablemgmt.factories.discovery import FactoryRegistry
from airflow_tablemgmt.operators.gate import SnapshotGateOperator
from airflow_tablemgmt.operators.maintenance import TableMaintenanceOperator

log = logging.getLogger(__name__)

DAG_PREFIX = "tms__"
START_DATE = datetime(2024, 1, 1, tzinfo=UTC)
BROKEN_DAG_ID = "tms__broken_declarations"


def dag_id_for(table_id: str, action: str) -> str:
    return f"{DAG_PREFIX}{table_id}__{action}"


def parse_dag_id(dag_id: str) -> tuple[str, str] | None:
    """``tms__lake.db.t__rewrite-files`` -> (``lake.db.t``, ``rewrite-files``); None if not ours."""
    if not dag_id.startswith(DAG_PREFIX) or dag_id == BROKEN_DAG_ID:
        return None
    body = dag_id[len(DAG_PREFIX) :]
    table_id, sep, action = body.rpartition("__")
    if not sep:
        return None
    try:
        TableIdentifier.parse(table_id)
    except TableMgmtError:
        return None
    return table_id, action


@dataclass
class BuildResult:
    dags: dict[str, DAG] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class BrokenDeclarationsDAG(DAG):
    """Carries declaration errors into Airflow: DagBag validates every DAG it finds and records a
    failure as an import error of the file, while it keeps the file's other DAGs."""

    def validate(self) -> None:
        raise InvalidDeclaration(self.description or "invalid table declarations")


def _timetable(interval: Interval) -> Any:
    if interval.cron is not None:
        return CronTriggerTimetable(interval.cron, timezone="UTC")
    assert interval.every is not None
    return DeltaTriggerTimetable(interval.every)


FALLBACK_INTERVAL = Interval(every=timedelta(days=1))


@dataclass(frozen=True)
class SchedulePlan:
    """How one (table, action) is scheduled, resolved from its settings and its factory's strategy.

    * ``schedule``: the DAG runs every ``interval``; with ``gate`` a first task skips the run when
      the table has no new snapshot.
    * ``event``: an asset watcher in the triggerer polls the snapshot every ``poll_interval`` and
      starts a run for a new data-changing snapshot, at most once per ``interval``; beside it a
      time-based run every ``fallback`` (catches what a stopped triggerer missed). The gate is on.

    Default: ``event`` for snapshot-driven actions, because a watcher poll costs a small fraction
    of a gate task's check (``benchmarks/gate_cost.py`` measures both; figures in
    ``benchmarks/README.md``), ``schedule`` for the others.
    """

    trigger: str
    interval: Interval
    gate: bool
    fallback: Interval | None = None
    poll_interval: timedelta = timedelta(seconds=10)

    @classmethod
    def resolve(cls, settings: ActionSettings, strategy: TriggerStrategy) -> SchedulePlan:
        interval = Interval.parse(settings.interval) if settings.interval else strategy.interval
        gate = strategy.on_new_snapshot if settings.on_new_snapshot is None else settings.on_new_snapshot
        trigger = settings.trigger or ("event" if gate else "schedule")
        if trigger == "schedule":
            return cls("schedule", interval, gate)
        if settings.fallback_interval:
            fallback = Interval.parse(settings.fallback_interval, "fallback-interval")
        elif interval.min_spacing() >= FALLBACK_INTERVAL.min_spacing():
            fallback = interval
        else:
            fallback = FALLBACK_INTERVAL
        return cls("event", interval, True, fallback, settings.poll_interval)

    def describe(self) -> str:
        if self.trigger == "schedule":
            return f"every {self.interval}" + (", when the table has a new snapshot" if self.gate else "")
        return (
            f"on new data snapshots (polled every {Interval(every=self.poll_interval)}), "
            f"at most every {self.interval}; fallback run every {self.fallback}"
        )


def table_asset(table: TableSpec, action: str, catalog: CatalogSpec, plan: SchedulePlan) -> Asset:
    """The asset whose watcher polls the table's current snapshot inside the triggerer.

    One asset per (table, action): each action has its own throttle (``min_interval`` = its
    interval), and an asset's events go to every DAG scheduled on it.
    """
    from airflow_tablemgmt.triggers.snapshot import TableSnapshotTrigger

    table_id = table.id
    trigger = TableSnapshotTrigger(
        table_id=table_id,
        catalog=catalog,
        poll_interval=plan.poll_interval.total_seconds(),
        min_interval=plan.interval.min_spacing().total_seconds(),
        data_changes_only=True,
    )
    return Asset(
        name=f"tablemgmt.{table_id}.{action}",
        uri=f"tablemgmt://{table.catalog}/{table.namespace}/{table.name}/{action}",
        group="tablemgmt",
        watchers=[AssetWatcher(name=f"tablemgmt-snapshot-{table_id}-{action}", trigger=trigger)],
    )


@dataclass(frozen=True)
class DagConfigDefaults:
    """Airflow settings a DAG would otherwise look up in the config on every construction.

    Each lookup walks the environment, the config file and the defaults, once per DAG; at thousands
    of DAGs that adds up to a visible share of parse time (``benchmarks/dag_parse.py``), so
    :func:`build_dags` reads them once and passes them in.
    """

    max_consecutive_failed_dag_runs: int = 0
    disable_bundle_versioning: bool = False

    @classmethod
    def from_airflow_config(cls) -> DagConfigDefaults:
        from airflow.sdk.configuration import conf

        return cls(
            max_consecutive_failed_dag_runs=conf.getint("core", "max_consecutive_failed_dag_runs_per_dag"),
            disable_bundle_versioning=conf.getboolean("dag_processor", "disable_bundle_versioning"),
        )


def build_dag(
    table: TableSpec,
    action: str,
    factories: FactoryRegistry,
    catalog: CatalogSpec | None = None,
    config: DagConfigDefaults | None = None,
    settings: ActionSettings | None = None,
) -> DAG:
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
    else:
        if catalog is None:
            raise InvalidDeclaration(
                f"table {table_id}: event-driven {action} needs its catalog {table.catalog!r}"
            )
        assert plan.fallback is not None
        schedule = AssetOrTimeSchedule(
            timetable=_timetable(plan.fallback), assets=table_asset(table, action, catalog, plan)
        )
    dag_id = dag_id_for(table_id, action)
    when = plan.describe()
    # Given to each task directly rather than as the DAG's default_args: merging default_args
    # deep-copies them once per task, which is measurable at 10,000 DAGs.
    task_args: dict[str, Any] = {
        "owner": table.owner,
        "retries": settings.retries,
        "retry_delay": settings.retry_delay,
        "priority_weight": table.priority,
    }
    if table.queue != "default":
        task_args["pool"] = table.queue
    with DAG(
        dag_id=dag_id,
        schedule=schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        max_active_tasks=parallelism,
        max_consecutive_failed_dag_runs=config.max_consecutive_failed_dag_runs,
        disable_bundle_versioning=config.disable_bundle_versioning,
        tags=["tablemgmt", table_id, action, str(table.format)],
        description=f"{action} on {table_id}: {when}",
        doc_md=(
            f"Maintenance of `{table_id}` ({table.format}): **{action}** {when}.\n\n"
            f"Declared settings: `{table.actions.get(action) or {}}`"
        ),
        is_paused_upon_creation=False,
    ) as dag:
        maintain = TableMaintenanceOperator(
            task_id="maintain",
            table=table_id,
            action=action,
            lease_wait=settings.lease_wait,
            **task_args,
        )
        if plan.gate:
            gate = SnapshotGateOperator(task_id="check_snapshot", table=table_id, action=action, **task_args)
            gate >> maintain
    return dag


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


def build_dags(
    tables: Iterable[TableSpec],
    factories: FactoryRegistry,
    *,
    only_dag_id: str | None = None,
    declaration_errors: Iterable[str] = (),
    catalogs: dict[str, CatalogSpec] | None = None,
) -> BuildResult:
    """Build every (table, enabled action) DAG, or only ``only_dag_id``. Errors are collected per
    table, never raised, and surface as one :class:`BrokenDeclarationsDAG`."""
    result = BuildResult(errors=list(declaration_errors))
    result.errors.extend(
        f"process factory plugin {name!r} failed to load: {err}" for name, err in factories.errors.items()
    )
    wanted = parse_dag_id(only_dag_id) if only_dag_id else None
    config = DagConfigDefaults.from_airflow_config()
    with cyclic_gc_paused(freeze_if=lambda: wanted is None and len(result.dags) >= FREEZE_AT_DAGS):
        for table in tables:
            table_id = table.id
            if wanted is not None and table_id != wanted[0]:
                continue
            catalog = (catalogs or {}).get(table.catalog)
            for action, settings in table.enabled_action_settings():
                if wanted is not None and action != wanted[1]:
                    continue
                try:
                    dag = build_dag(table, action, factories, catalog, config, settings)
                except Exception as e:  # noqa: BLE001 - one bad table must not hide the others
                    result.errors.append(f"table {table_id}, action {action}: {type(e).__name__}: {e}")
                    continue
                result.dags[dag.dag_id] = dag
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
