"""Registry -> DAG objects: one DAG per (table, enabled action).

A pure function of the registry and the factories. No network and no Spark at parse time; one
registry read; when Airflow says which DAG it is about to run (``get_parsing_context()``) only that
one is built. A broken declaration becomes an import error naming the table, and every other DAG
still loads.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import (
    DAG,
    Asset,
    AssetOrTimeSchedule,
    AssetWatcher,
    CronTriggerTimetable,
    DeltaTriggerTimetable,
)

from airflow_tablemgmt.core.errors import InvalidDeclaration, TableMgmtError
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.core.triggers import Interval
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


def table_asset(table: TableSpec, catalog: CatalogSpec, poll_interval: float) -> Asset:
    """The asset whose watcher polls the table's current snapshot inside the triggerer."""
    from airflow_tablemgmt.triggers.snapshot import TableSnapshotTrigger

    trigger = TableSnapshotTrigger(
        table_id=table.id, catalog=catalog.model_dump(mode="json", by_alias=True), poll_interval=poll_interval
    )
    return Asset(
        name=f"tablemgmt.{table.id}",
        uri=f"tablemgmt://{table.catalog}/{table.namespace}/{table.name}",
        watchers=[AssetWatcher(name=f"tablemgmt-snapshot-{table.id}", trigger=trigger)],
    )


@dataclass(frozen=True)
class DagConfigDefaults:
    """Airflow settings a DAG would otherwise look up in the config on every construction.

    Two lookups per DAG cost ~0.1 ms each (environment, config file, defaults); at 10,000 DAGs
    that is a second of parse time, so :func:`build_dags` reads them once and passes them in.
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
) -> DAG:
    config = config or DagConfigDefaults.from_airflow_config()
    table_id = table.id
    factory = factories.for_action(table.format, action)
    strategy = factory.trigger_strategy(table.format, action)
    settings = table.action_settings(action)
    interval = Interval.parse(settings.interval) if settings.interval else strategy.interval
    parallelism = settings.parallelism or strategy.parallelism
    on_new_snapshot = (
        strategy.on_new_snapshot if settings.on_new_snapshot is None else settings.on_new_snapshot
    )
    schedule: Any = _timetable(interval)
    if settings.trigger == "event":
        if catalog is None:
            raise InvalidDeclaration(
                f"table {table.id}: event-driven {action} needs its catalog {table.catalog!r}"
            )
        schedule = AssetOrTimeSchedule(
            timetable=schedule, assets=table_asset(table, catalog, settings.poll_interval.total_seconds())
        )
        on_new_snapshot = True  # our own commits also wake the watcher: the gate turns them into skips
    dag_id = dag_id_for(table_id, action)
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
        description=f"{action} on {table_id} every {interval}"
        + (" and on new snapshots" if settings.trigger == "event" else ""),
        doc_md=(
            f"Maintenance of `{table_id}` ({table.format}): **{action}** every `{interval}`.\n\n"
            f"Options: `{settings.options()}`"
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
        if on_new_snapshot:
            gate = SnapshotGateOperator(task_id="check_snapshot", table=table_id, action=action, **task_args)
            gate >> maintain
    return dag


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Building thousands of DAGs allocates millions of long-lived objects and no garbage; the
    cyclic collector would rescan them over and over (~20% of the build at 10,000 DAGs)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
    with cyclic_gc_paused():
        for table in tables:
            table_id = table.id
            if wanted is not None and table_id != wanted[0]:
                continue
            catalog = (catalogs or {}).get(table.catalog)
            for action in table.enabled_actions():
                if wanted is not None and action != wanted[1]:
                    continue
                try:
                    dag = build_dag(table, action, factories, catalog, config)
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
