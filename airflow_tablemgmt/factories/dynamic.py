"""DynamicTableProcessFactory: a dynamic table's ``refresh`` (FLIP-435), as a Spark job or as NO_DATA.

A refresh process carries what asked for it in its ``parameters`` (trigger, is_periodic,
schedule_time, static_partitions, dynamic_options: the DAG run's conf, or the CLI's arguments). From
them and the stored definition this factory builds the job options DT-SPARK's ``refresh`` takes:

* a table still CREATING (or a CREATION trigger): ``mode: create`` (create the Iceberg table from the
  query's schema, then its first refresh; on failure the job drops what it created);
* a periodic refresh with date formatters: the partitions ``format(scheduleTime - freshness)``;
  static partitions given by a manual refresh: exactly those; otherwise the whole table;
* a *periodic full* refresh whose source tables have no snapshot newer than the ones the last
  successful refresh read: no job at all, a process with ``refresh_action: NO_DATA`` (pyiceberg reads
  the snapshot pointers; no JVM). Partition refreshes for a new schedule time always run.

The process ``summary`` gets Snowflake's refresh-history columns (:func:`complete_summary`).

The factory reads the store, so it declares :class:`~airflow_tablemgmt.core.factory.StoreAwareFactory`;
the refresh request's encoding (parameters, DAG-run conf, schedule time) is
:mod:`airflow_tablemgmt.core.dynamic.refresh`, imported where a refresh runs (not at module level:
this module is on the ``tablemgmt run`` start-up path, which never loads the dynamic-table model).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.actions import REFRESH as REFRESH_ACTION
from airflow_tablemgmt.core.errors import ActionNotSupported
from airflow_tablemgmt.core.factory import JobSpec, RunPlan, TableOutcome, TriggerContext
from airflow_tablemgmt.core.formats import DEFAULT_FORMAT
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_tablemgmt.core.dynamic import DynamicTableSpec
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.dynamic import DynamicTable

log = logging.getLogger(__name__)

REFRESH = REFRESH_ACTION.name
# The DAG's schedule comes from the refresh action's own settings (the freshness cron); this interval
# is only the strategy's required default. Refreshes read other tables: never gated on the table's own
# new snapshots.
STRATEGY = TriggerStrategy(Interval.parse("1h"), on_new_snapshot=False, parallelism=4)


def _definition_doc(definition: DynamicTableSpec) -> dict[str, Any]:
    return definition.model_dump(mode="json", by_alias=True)


def job_options(
    definition: DynamicTableSpec,
    mode: str,
    *,
    partition_values: dict[str, str] | None = None,
    recreate: bool = False,
    dynamic_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``refresh`` job's options (the contract with ``spark/refresh.py``)."""
    doc = _definition_doc(definition)
    return {
        "mode": mode,
        "query": definition.query,
        "partitioned_by": list(definition.partitioned_by),
        "partition_values": dict(partition_values or {}),
        "expected_schema": doc.get("schema"),
        "recreate": bool(recreate),
        "source_tables": list(definition.source_tables or []),
        "dynamic_options": dict(dynamic_options or {}),
        "refresh_mode": str(definition.refresh_mode),
    }


def _job(definition: DynamicTableSpec, catalog: CatalogSpec, options: dict[str, Any]) -> JobSpec:
    return JobSpec(
        table={"catalog": definition.catalog, "namespace": definition.namespace, "name": definition.name},
        catalog=catalog.model_dump(mode="json", by_alias=True),
        action=REFRESH,
        options=options,
    )


def analyse_job(definition: DynamicTableSpec, catalog: CatalogSpec) -> JobSpec:
    """Spark's analysis of the query (schema, source tables); creates nothing."""
    return _job(definition, catalog, job_options(definition, "analyse"))


def drop_job(definition: DynamicTableSpec, catalog: CatalogSpec) -> JobSpec:
    """Drop the table and purge its files (``drop --purge``)."""
    return _job(definition, catalog, job_options(definition, "drop"))


def is_scheduled(process: Process) -> bool:
    from airflow_tablemgmt.core.dynamic.refresh import SCHEDULED, trigger_of

    return trigger_of(process.parameters) == SCHEDULED


class DynamicTableProcessFactory:
    """The ``refresh`` action of dynamic tables. The job is DT-SPARK's ``refresh`` maintainer."""

    name = "dynamic-tables"

    def supported_actions(self) -> dict[str, set[str]]:
        return {DEFAULT_FORMAT: {REFRESH}}  # a dynamic table is a table of the catalogs' own format

    def trigger_strategy(self, format: str, action: str) -> TriggerStrategy:
        if str(format) != DEFAULT_FORMAT or action != REFRESH:
            raise ActionNotSupported(
                f"the dynamic-tables factory does not support {format}/{action}; supported: {REFRESH}"
            )
        return STRATEGY

    # The protocol's entry points: without the store they cannot see the definition, so the lifecycle
    # calls :meth:`trigger_process`; these answer for callers that only know the protocol.
    def trigger(self, table: TableSpec, action: str, context: TriggerContext) -> JobSpec | None:
        raise ActionNotSupported(
            f"refresh of {table.id}: a dynamic table's refresh needs its definition from the store; "
            "run it through the process lifecycle (ProcessRunner), which calls trigger_process"
        )

    def recover(self, table: TableSpec, process: Process, context: TriggerContext) -> JobSpec:
        return self.trigger(table, process.action, context)  # type: ignore[return-value]

    # -- what the lifecycle calls (StoreAwareFactory) -------------------------------------------------
    def run_parameters(
        self,
        store: Store,
        table: TableSpec,
        action: str,
        *,
        conf: dict[str, Any] | None,
        run_type: str | None,
        instant: datetime,
    ) -> RunPlan:
        """A refresh task's process parameters from its DAG run (:func:`core.dynamic.refresh.run_parameters`).
        A scheduled run of a SUSPENDED table skips: suspension pauses the DAG, and this also covers an
        auto-suspension, which task code cannot pause."""
        from airflow_tablemgmt.core.dynamic.refresh import SCHEDULED, run_parameters
        from airflow_tablemgmt.store.dynamic import SUSPENDED

        dt = store.dynamic.get(table.id)
        params = run_parameters(str(dt.state), conf, run_type, instant)
        if str(dt.state) == SUSPENDED and params["trigger"] == SCHEDULED:
            return RunPlan(
                params,
                skip_reason=f"dynamic table {table.id} is suspended ({dt.suspended_reason}); "
                "`tablemgmt dt resume` to refresh it again",
            )
        return RunPlan(params)

    def trigger_process(
        self, store: Store, table: TableSpec, process: Process, context: TriggerContext
    ) -> JobSpec | dict[str, Any]:
        """The job for this refresh process, or (no job) the summary of a NO_DATA refresh.

        A recovering attempt gets the same job: a refresh overwrites atomically, so running it again
        is safe; a creation drops what it created on failure and runs again from scratch.
        """
        from airflow_tablemgmt.core.dynamic.incremental_decision import previous_of
        from airflow_tablemgmt.core.dynamic.refresh import CREATION, SCHEDULED, schedule_time_of, trigger_of
        from airflow_tablemgmt.store.dynamic import CREATING

        dt = store.dynamic.get(table.id)
        params = process.parameters
        trigger = trigger_of(params)
        is_periodic = bool(params.get("is_periodic", trigger == SCHEDULED))
        schedule_time = schedule_time_of(params, process.instant)
        options = {**dt.dynamic_options, **dict(params.get("dynamic_options") or {})}
        definition = dt.definition
        if dt.state == CREATING or trigger == CREATION:
            return _job(
                definition, context.catalog, job_options(definition, "create", dynamic_options=options)
            )
        if params.get("recreate"):  # alter --recreate: the whole table, replaced from the new query
            # No expected schema: the job compares the query with the table as it is, and replaces it.
            recreate = job_options(definition, "refresh", recreate=True, dynamic_options=options)
            return _job(definition, context.catalog, {**recreate, "expected_schema": None})
        static = {str(k): str(v) for k, v in dict(params.get("static_partitions") or {}).items()}
        if static:
            values = static
        elif is_periodic:
            values = definition.partition_values(schedule_time)
        else:
            values = {}
        if is_periodic and not values:
            no_data = self._no_data(store, dt, context)
            if no_data is not None:
                return no_data
        refresh = job_options(definition, "refresh", partition_values=values, dynamic_options=options)
        last = store.processes.last_finished_success(table.id, REFRESH)  # the last commit, not instant
        previous = None if last is None else previous_of(last.summary, last.id)
        return _job(definition, context.catalog, {**refresh, "previous": previous})

    def _no_data(self, store: Store, dt: DynamicTable, context: TriggerContext) -> dict[str, Any] | None:
        """The NO_DATA summary when no source table changed since the last successful refresh (the last to
        finish: a refresh at an older instant may have run after a newer one)."""
        last = store.processes.last_finished_success(dt.id, REFRESH) or context.last_success
        sources = list(dt.definition.source_tables or [])
        if last is None or not sources or not isinstance((last.summary or {}).get("source_snapshots"), dict):
            return None
        last_snapshots = {str(k): v for k, v in last.summary["source_snapshots"].items()}  # type: ignore[index]
        if set(last_snapshots) != set(sources):
            return None  # the query's sources changed (altered query): refresh
        started = time.perf_counter()
        try:
            from airflow_tablemgmt.core.dynamic.incremental_decision import carried_over
            from airflow_tablemgmt.metadata.dynamic import check_sources

            check = check_sources(source_catalogs(store, sources, context.resolve_catalog), last_snapshots)
        except Exception:  # noqa: BLE001 - when in doubt, refresh (a wasted job, never a stale table)
            log.warning("tablemgmt: NO_DATA check for %s failed; refreshing", dt.id, exc_info=True)
            return None
        if check.has_new_data:
            return None
        current = check.snapshots
        took = round(time.perf_counter() - started, 6)
        log.info("tablemgmt: %s: no source table changed since process %s: NO_DATA", dt.id, last.id)
        return {
            "refresh_action": "NO_DATA",
            **carried_over(last.summary),
            "source_snapshots": current,
            "partitions_written": [],
            "rows_written": 0,
            "application_id": None,
            "no_data_check_seconds": took,
            "reason": f"no source table has a snapshot newer than those refresh {last.id} read",
        }

    def complete_summary(
        self,
        process: Process,
        summary: dict[str, Any],
        *,
        application_id: str | None = None,
        duration_seconds: float | None = None,
    ) -> dict[str, Any]:
        """Snowflake's refresh-history columns on the summary (which is also the task's XCom)."""
        from airflow_tablemgmt.core.dynamic.refresh import CREATION, format_schedule_time, trigger_of

        params = process.parameters
        out = dict(summary)
        out.setdefault("refresh_action", "FULL")
        # A job that created the table was a creation, whatever its parameters say (issue 41 item 6).
        out["trigger"] = CREATION if summary.get("created") else trigger_of(params)
        out["schedule_time"] = params.get("schedule_time") or format_schedule_time(process.instant)
        out.setdefault("source_snapshots", {})
        out.setdefault("partitions_written", [])
        out.setdefault("rows_written", 0)
        if out.get("application_id") is None:
            out["application_id"] = application_id
        if out.get("duration_seconds") is None:
            out["duration_seconds"] = duration_seconds
        return out

    def on_finished(
        self, store: Store, process: Process, summary: dict[str, Any] | None, error: str | None
    ) -> TableOutcome | None:
        """Record the outcome on the table: a success makes a CREATING table ACTIVE (with the schema
        and source tables the creation found) and clears the failure count; a failed scheduled refresh
        counts towards ``suspend-after-failures``. The answer says when the table is now SUSPENDED."""
        from airflow_tablemgmt.store.dynamic import CREATING, SUSPENDED

        try:
            dt = store.dynamic.get(process.table_id)
        except Exception:  # noqa: BLE001 - dropped meanwhile: nothing to record
            return None
        if error is not None and dt.state == CREATING and dt.managed_by == Owner.STORE:
            # A creation that failed for good (REST's, run here on a worker) is not left CREATING:
            # as the CLI's create, the registration (and with it the refresh DAG) is removed; the
            # failed process, with its reason, stays in the history. tables.yaml's own tables stay.
            store.dynamic.delete(process.table_id, Owner.STORE)
            return TableOutcome(
                state="REMOVED",
                halted=f"{process.table_id} was removed: its creation failed (process {process.id})",
            )
        if summary is not None and (summary.get("schema") or summary.get("source_tables") is not None):
            doc = _definition_doc(dt.definition)
            if summary.get("schema"):
                doc["schema"] = summary["schema"]
            if summary.get("source_tables") is not None:
                doc["source-tables"] = list(summary["source_tables"])
            if dt.state == CREATING or doc != _definition_doc(dt.definition):
                definition = type(dt.definition).model_validate(doc)
                store.dynamic.upsert(definition, dt.managed_by)
        if summary is not None and isinstance(summary.get("incremental"), dict):
            store.dynamic.set_analysis(process.table_id, summary["incremental"])
        recorded = store.dynamic.record_result(
            process.table_id, success=error is None, scheduled=is_scheduled(process), reason=error
        )
        return _outcome(recorded, SUSPENDED)


def creation_retry_note(table_id: str) -> str:
    """What happens next to a CREATING table whose creation never ran: every run of its refresh DAG
    creates it (:func:`core.dynamic.refresh.run_parameters`), so it waits for that run."""
    return (
        f"{table_id} stays CREATING: the next run of its refresh DAG creates it (its schedule, or now: "
        f"`tablemgmt dt refresh {table_id}` / POST .../refresh)"
    )


def record_not_started(
    store: Store,
    table_id: str,
    instant: datetime,
    reason: str,
    *,
    conf: dict[str, Any] | None = None,
    run_type: str | None = None,
    dag_id: str | None = None,
    run_id: str | None = None,
) -> Process | None:
    """Record a creation run whose job never started (Airflow failed its task before it ran, e.g. after
    waiting in a backed-up executor queue; or the task failed before taking its process): the run's
    process (REST's PENDING creation row, else a new one with the run's parameters) ends FAILED with
    ``reason`` and what happens next. None when there is nothing to record: the table is not CREATING,
    or the run's process got further (its own outcome is recorded by :meth:`on_finished`).

    The table stays CREATING, unlike a creation that ran and failed (removed, :meth:`on_finished`): it
    never ran, so its definition is not at fault, and CREATING is the state every later run of the
    refresh DAG creates from. Nothing here can start that run: task code and the DAG processor, where
    Airflow calls the failure callback, have no way to create DAG runs under Airflow 3."""
    from airflow_tablemgmt.core.dynamic.refresh import run_parameters
    from airflow_tablemgmt.core.errors import IllegalTransition
    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.store.dynamic import CREATING

    dt = store.dynamic.find(table_id)
    if dt is None or str(dt.state) != CREATING:
        return None
    process = store.processes.find(table_id, REFRESH, instant)
    if process is None:
        params = run_parameters(CREATING, conf, run_type, instant)
        process, _ = store.processes.open(
            table_id, REFRESH, instant, parameters=params, dag_id=dag_id, run_id=run_id
        )
    if process.status != ProcessStatus.PENDING:
        return None
    try:
        return store.processes.transition(
            process.id,
            ProcessStatus.FAILED,
            expected=ProcessStatus.PENDING,
            attempt=process.attempt,
            failure_reason=f"{reason}; {creation_retry_note(table_id)}",
        )
    except IllegalTransition:  # a late start claimed it meanwhile: its outcome is its own
        return None


def after_reaped(store: Store, process: Process) -> str | None:
    """What the reaper adds to its reason when it closed a refresh of a CREATING table (a creation whose
    run never started, or whose worker was lost; ``services/reap.py``): the same answer as
    :func:`record_not_started`, the table stays CREATING for the next run. None for anything else."""
    from airflow_tablemgmt.store.dynamic import CREATING

    if process.action != REFRESH:
        return None
    dt = store.dynamic.find(process.table_id)
    if dt is None or str(dt.state) != CREATING:
        return None
    return creation_retry_note(process.table_id)


def _outcome(dt: DynamicTable | None, suspended: str) -> TableOutcome | None:
    if dt is None:
        return None
    state = str(dt.state)
    halted = None
    if state == suspended and dt.suspended_reason:
        halted = f"{dt.id} is now suspended: {dt.suspended_reason}"
    return TableOutcome(state=state, halted=halted)


def source_catalogs(
    store: Store, table_ids: list[str], resolve: Callable[[CatalogSpec], CatalogSpec] | None = None
) -> dict[str, CatalogSpec]:
    """The catalogs of ``table_ids`` (secret references resolved by ``resolve``, which the runner's
    builder hands in where Airflow is at hand), for the pyiceberg snapshot reads of the NO_DATA decision."""
    catalogs: dict[str, CatalogSpec] = {}
    for name in sorted({t.split(".", 1)[0] for t in table_ids}):
        spec = store.catalogs.get(name)
        if resolve is not None:
            try:
                spec = resolve(spec)
            except ImportError:  # no Airflow here: the catalog's properties as stored
                pass
        catalogs[name] = spec
    return catalogs
