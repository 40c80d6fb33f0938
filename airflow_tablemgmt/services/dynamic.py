"""Dynamic-table operations (FLIP-435 on Airflow): create, get, list, history, suspend, resume, alter,
drop, refresh. The CLI (``tablemgmt dt ...``) and the REST API call these same functions, so both
validate and answer identically.

What only Airflow can do is the caller's part, passed in as callables (this module imports no Airflow):

* a :class:`RefreshDagTrigger` creates a DAG run of the table's refresh DAG with a conf;
* a :class:`DagPauser` pauses or unpauses that DAG (suspend / resume / drop);
* a ``runner`` (a :class:`~airflow_tablemgmt.lifecycle.Submitter`, e.g. ``SparkJobHook``) runs a
  Spark job here and now: the creation job, the analysis of an altered query, a purge.

Refresh processes use the action ``refresh``; their instant is the schedule time (periodic) or now
(manual, creation), so the same periodic schedule time asked twice is one process.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from airflow_tablemgmt.core.errors import (
    IllegalTransition,
    InvalidDeclaration,
    JobFailed,
    TableManagedByCode,
    TableNotFound,
)
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.query_policy import session_option_refusal
from airflow_tablemgmt.core.tables import Owner, format_validation_error
from airflow_tablemgmt.services.errors import Conflict, InvalidInput, NotFound
from airflow_tablemgmt.services.run_now import dag_id_for

if TYPE_CHECKING:
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec
    from airflow_tablemgmt.lifecycle import Submitter
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.dynamic import DynamicTable

log = logging.getLogger(__name__)

REFRESH = "refresh"
SCHEDULE_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
PERIODIC_NEEDS_SCHEDULE_TIME = "Schedule time must be specified for periodic refresh."
_SCHEDULE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")


class RefreshDagTrigger(Protocol):
    def __call__(self, dag_id: str, logical_date: datetime, conf: Mapping[str, Any]) -> str:
        """Create a run of ``dag_id`` at ``logical_date`` carrying ``conf``; return its run id. A run
        already there at that logical date is the answer (its run id), not an error."""


class DagPauser(Protocol):
    def __call__(self, dag_id: str, paused: bool) -> None:
        """Pause (True) or unpause (False) ``dag_id`` in Airflow."""


# -- views ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DynamicTableView:
    """A dynamic table as shown: definition, state, schedule and its last refresh."""

    table: DynamicTable
    dag_id: str
    freshness: str
    cron: str | None
    last_refresh: Process | None

    def to_dict(self) -> dict[str, Any]:
        out = self.table.to_dict()
        out.update(
            dag_id=self.dag_id,
            freshness=self.freshness,
            cron=self.cron,
            last_refresh=history_row(self.last_refresh) if self.last_refresh else None,
        )
        return out


@dataclass(frozen=True)
class RefreshRequested:
    """A refresh submitted to Airflow: the process (FLIP-435's ``jobId``), the DAG run and the cluster."""

    process: Process
    dag_id: str
    run_id: str | None
    cluster_info: dict[str, Any] = field(default_factory=dict)
    reused: bool = False  # the same periodic schedule time asked again: the existing process

    def to_dict(self) -> dict[str, Any]:
        return {
            "jobId": self.process.id,
            "dagRunId": self.run_id,
            "clusterInfo": self.cluster_info,
            "status": str(self.process.status),
            "reused": self.reused,
        }


@dataclass(frozen=True)
class AlterResult:
    table: DynamicTable
    changed: list[str]
    process: Process | None = None  # the analysis / recreation job, when the query changed


def history_row(p: Process) -> dict[str, Any]:
    """One refresh in Snowflake's REFRESH_HISTORY columns (summary once it ran, else its parameters)."""
    s: dict[str, Any] = dict(p.summary or {})
    params: dict[str, Any] = dict(p.parameters or {})
    duration = s.get("duration_seconds")
    if duration is None and p.finished_at and p.started_at:
        duration = round((p.finished_at - p.started_at).total_seconds(), 3)
    return {
        "process_id": p.id,
        "state": str(p.status),
        "reason": p.failure_reason or s.get("reason"),
        "trigger": s.get("trigger") or params.get("trigger"),
        "refresh_action": s.get("refresh_action"),
        "schedule_time": s.get("schedule_time") or params.get("schedule_time") or p.instant.isoformat(),
        "source_snapshots": s.get("source_snapshots") or {},
        "partitions_written": s.get("partitions_written") or [],
        "rows_written": s.get("rows_written"),
        "duration_seconds": duration,
        "application_id": s.get("application_id") or p.external_id,
        "attempt": p.attempt,
        "started_at": p.started_at.isoformat() if p.started_at else None,
        "finished_at": p.finished_at.isoformat() if p.finished_at else None,
    }


# -- parsing -------------------------------------------------------------------------------------------


def parse_definition(data: Mapping[str, Any], source: str = "dynamic table") -> DynamicTableSpec:
    """A validated ``DynamicTableSpec``; every problem named by its field (:class:`InvalidInput`)."""
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec

    if not isinstance(data, Mapping):
        raise InvalidInput(f"{source}: must be a mapping with identifier, query, freshness; got {data!r}")
    try:
        return DynamicTableSpec.model_validate(dict(data))
    except ValidationError as e:
        raise InvalidInput(format_validation_error(e, source)) from None
    except InvalidDeclaration as e:
        raise InvalidInput(str(e)) from None


def parse_schedule_time(value: str | datetime | None, field: str = "scheduleTime") -> datetime | None:
    """FLIP-435's ``yyyy-MM-dd HH:mm:ss`` (UTC); ISO 8601 is accepted too. None stays None."""
    if value is None or isinstance(value, datetime):
        if isinstance(value, datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).replace(microsecond=0) if value else None
    text = str(value).strip()
    try:
        if _SCHEDULE_TIME.match(text):
            parsed = datetime.strptime(text, SCHEDULE_TIME_FORMAT)
        else:
            parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"{field}: {value!r} is not a time; expected yyyy-MM-dd HH:mm:ss, e.g. 2026-02-01 00:00:00"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).replace(microsecond=0)


def format_schedule_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime(SCHEDULE_TIME_FORMAT)


# -- reads ---------------------------------------------------------------------------------------------


def _load(store: Store, table_id: str) -> DynamicTable:
    from airflow_tablemgmt.store.dynamic import NotADynamicTable

    try:
        return store.dynamic.get(table_id)
    except TableNotFound as e:
        raise NotFound(str(e)) from None
    except NotADynamicTable as e:
        raise NotFound(str(e)) from None


def get(store: Store, table_id: str) -> DynamicTableView:
    dt = _load(store, table_id)
    return _view(store, dt)


def _view(store: Store, dt: DynamicTable) -> DynamicTableView:
    last = store.processes.list(table_id=dt.id, action=REFRESH, limit=1)
    freshness = dt.definition.freshness
    return DynamicTableView(
        table=dt,
        dag_id=dag_id_for(dt.id, REFRESH),
        freshness=str(freshness),
        cron=freshness.to_cron(),
        last_refresh=last[0] if last else None,
    )


def list_(store: Store) -> list[DynamicTableView]:
    return [_view(store, dt) for dt in store.dynamic.list()]


def history(store: Store, table_id: str, limit: int = 50) -> list[Process]:
    """Refresh processes of the table, newest first (history outlives a drop)."""
    if limit < 1:
        raise InvalidInput(f"limit: must be at least 1, got {limit}")
    if store.dynamic.find(table_id) is None:
        known = {t.spec.id for t in store.tables.list(include_deleted=True)}
        if table_id not in known:
            _load(store, table_id)  # NotFound naming close matches
    return store.processes.list(table_id=table_id, action=REFRESH, limit=limit)


# -- create --------------------------------------------------------------------------------------------


def _check_store_owned(dt: DynamicTable) -> None:
    if dt.managed_by == Owner.CODE:
        raise Conflict(str(TableManagedByCode(dt.id)))


def check_upstreams(store: Store, definition: DynamicTableSpec) -> list[str]:
    """The dynamic tables ``definition`` reads; a ``downstream`` freshness needs one, and a cycle
    through the others is an error naming it."""
    from airflow_tablemgmt.core.dynamic import find_cycle

    others = {dt.id: dt for dt in store.dynamic.list() if dt.id != definition.id}
    upstream = sorted(definition.upstream_candidates(set(others)))
    if definition.freshness.is_downstream and not upstream:
        raise InvalidInput(
            f"freshness: 'downstream' refreshes after an upstream dynamic table, but the query of "
            f"{definition.id} reads none; dynamic tables: {', '.join(sorted(others)) or '(none)'}"
        )
    edges = {tid: set(dt.definition.upstream_candidates(set(others) | {definition.id}) - {tid})
             for tid, dt in others.items()}  # fmt: skip
    edges[definition.id] = set(upstream)
    cycle = find_cycle(edges)
    if cycle:
        raise InvalidInput(f"query: dynamic tables would read each other in a cycle: {' -> '.join(cycle)}")
    return upstream


def create(
    store: Store,
    definition_dict: Mapping[str, Any],
    runner: Submitter | None = None,
    owner: Owner = Owner.STORE,
    *,
    spark_conn_id: str = "spark_default",
) -> tuple[DynamicTable, Process]:
    """Validate, create the Iceberg table and run its first refresh (trigger CREATION) now, here (the
    CLI's path; REST queues it on a worker: ``services.dynamic_create``), through the same process
    path as every run; on success the table is ACTIVE with the schema and source tables
    Spark found. On failure nothing is left: the Spark job drops what it created, the registration is
    removed, and the error says why (the failed process stays in the history)."""
    from airflow_tablemgmt.services.dynamic_create import declare

    definition = declare(store, definition_dict, owner).definition
    instant = datetime.now(UTC).replace(microsecond=0)
    params = refresh_parameters("CREATION", False, instant, {}, {})
    try:
        outcome = _run_now(store, definition.id, instant, params, runner, spark_conn_id)
    except Exception:
        _forget(store, definition.id, owner)
        raise
    dt = store.dynamic.get(definition.id)
    return dt, outcome


def _forget(store: Store, table_id: str, owner: Owner) -> None:
    try:
        store.dynamic.delete(table_id, owner)
    except Exception:  # noqa: BLE001 - the original failure is the one to report
        log.warning("tablemgmt: could not remove the failed dynamic table %s", table_id, exc_info=True)


def _run_now(
    store: Store,
    table_id: str,
    instant: datetime,
    parameters: dict[str, Any],
    runner: Submitter | None,
    spark_conn_id: str,
) -> Process:
    """Run the refresh process at ``instant`` here (the CLI's and creation's path), as ``run_now`` does."""
    from airflow_tablemgmt.factories.discovery import default_factories
    from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest

    if runner is None:
        from airflow_tablemgmt.hooks.spark_job import SparkJobHook

        runner = SparkJobHook(spark_conn_id)
    process_runner = ProcessRunner(store, default_factories(), runner)
    outcome = process_runner.run(
        RunRequest(table_id, REFRESH, instant, holder="tablemgmt-dt", parameters=parameters)
    )
    return outcome.process


def refresh_parameters(
    trigger: str,
    is_periodic: bool,
    schedule_time: datetime,
    static_partitions: Mapping[str, Any] | None,
    dynamic_options: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The process ``parameters`` (and the DAG run's conf) of a refresh."""
    return {
        "trigger": str(trigger),
        "is_periodic": bool(is_periodic),
        "schedule_time": format_schedule_time(schedule_time),
        "static_partitions": {str(k): str(v) for k, v in (static_partitions or {}).items()},
        "dynamic_options": dict(dynamic_options or {}),
    }


# -- lifecycle -----------------------------------------------------------------------------------------


def suspend(store: Store, table_id: str, pauser: DagPauser | None) -> DynamicTable:
    """Pause the refresh DAG and mark the table SUSPENDED; suspending twice is an error (as in Flink)."""
    from airflow_tablemgmt.store.dynamic import ACTIVE, CREATING, SUSPENDED, DynamicStateChanged

    dt = _load(store, table_id)
    if dt.state == SUSPENDED:
        raise Conflict(f"dynamic table {table_id} is already suspended")
    if pauser is not None:
        pauser(dag_id_for(table_id, REFRESH), True)
    try:
        return store.dynamic.set_state(
            table_id, SUSPENDED, expected=(ACTIVE, CREATING), reason="suspended by a user"
        )
    except DynamicStateChanged:
        raise Conflict(f"dynamic table {table_id} is already suspended") from None


def resume(
    store: Store,
    table_id: str,
    pauser: DagPauser | None,
    dynamic_options: Mapping[str, Any] | None = None,
) -> DynamicTable:
    """Mark the table ACTIVE (failure count cleared, ``dynamic_options`` kept for later refreshes) and
    unpause its DAG. Resuming a table that is not suspended is an error."""
    from airflow_tablemgmt.store.dynamic import ACTIVE, SUSPENDED, DynamicStateChanged

    dt = _load(store, table_id)
    if dt.state != SUSPENDED:
        raise Conflict(f"dynamic table {table_id} is not suspended (state {dt.state}); nothing to resume")
    options = _check_options(dynamic_options, "dynamicOptions") if dynamic_options is not None else None
    try:
        dt = store.dynamic.set_state(
            table_id, ACTIVE, expected=(SUSPENDED,), dynamic_options=options, reset_failures=True
        )
    except DynamicStateChanged:
        raise Conflict(f"dynamic table {table_id} is not suspended; nothing to resume") from None
    if pauser is not None:
        pauser(dag_id_for(table_id, REFRESH), False)
    return dt


def _check_options(options: Mapping[str, Any] | None, field: str) -> dict[str, str]:
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise InvalidInput(f"{field}: must map option names to values, got {options!r}")
    out: dict[str, str] = {}
    for k, v in options.items():
        if not isinstance(k, str) or not k.strip():
            raise InvalidInput(f"{field}: option names must be non-empty strings, got {k!r}")
        if isinstance(v, dict | list):
            raise InvalidInput(f"{field}.{k}: must be a string, number or boolean, got {v!r}")
        if refusal := session_option_refusal(k, field):  # e.g. spark.sql.catalog.*: core.query_policy
            raise InvalidInput(refusal)
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def alter(
    store: Store,
    table_id: str,
    freshness: str | None = None,
    query: str | None = None,
    recreate: bool = False,
    runner: Submitter | None = None,
    *,
    spark_conn_id: str = "spark_default",
) -> AlterResult:
    """Change the freshness (the DAG is rescheduled on the next parse) and/or the query.

    A new query is analysed by Spark now: a query that fails, that no longer produces a partition
    column, or whose schema differs from the table's is an error unless ``recreate`` (then the table
    is dropped and created again from the new query, trigger CREATION). Nothing changes on error.
    """
    dt = _load(store, table_id)
    _check_store_owned(dt)
    if freshness is None and query is None:
        raise InvalidInput("alter: give --freshness and/or --query")
    current = dt.definition.model_dump(mode="json", by_alias=True)
    data = dict(current)
    changed: list[str] = []
    if freshness is not None:
        data["freshness"] = freshness
        changed.append("freshness")
    if query is not None:
        data["query"] = query
        changed.append("query")
    new = parse_definition(data, f"dynamic table {table_id}")
    if query is not None:
        check_upstreams(store, new)
    process: Process | None = None
    if query is not None and (new.query != dt.definition.query or recreate):
        analysis = _analyse(store, new, runner, spark_conn_id)
        old_schema = [_column_key(c) for c in (current.get("schema") or [])]
        new_schema = [_column_key(c) for c in analysis.get("schema") or []]
        if old_schema and new_schema != old_schema and not recreate:
            raise InvalidInput(
                f"query: the new query's schema {_schema_text(new_schema)} differs from the table's "
                f"{_schema_text(old_schema)}; give --recreate to drop and recreate {table_id} from it"
            )
        new = parse_definition(
            {**new.model_dump(mode="json", by_alias=True), "schema": analysis.get("schema"),
             "source-tables": analysis.get("source_tables") or []},
            f"dynamic table {table_id}",
        )  # fmt: skip
        if recreate:
            # The table is replaced in one commit by a refresh with the new query (recreate: the
            # job's CREATE OR REPLACE ... AS SELECT); until it succeeds the old definition stays.
            store.dynamic.upsert(new, dt.managed_by)
            instant = datetime.now(UTC).replace(microsecond=0)
            params = refresh_parameters("MANUAL", False, instant, {}, {})
            params["recreate"] = True
            try:
                process = _run_now(store, table_id, instant, params, runner, spark_conn_id)
            except Exception:
                store.dynamic.upsert(dt.definition, dt.managed_by)
                raise
            return AlterResult(store.dynamic.get(table_id), changed, process)
    store.dynamic.upsert(new, dt.managed_by)
    return AlterResult(store.dynamic.get(table_id), changed, process)


def _column_key(c: Any) -> tuple[str, str]:
    if isinstance(c, Mapping):
        return (str(c.get("name", "")).lower(), str(c.get("type", "")).lower())
    return (str(c).lower(), "")


def _schema_text(cols: list[tuple[str, str]]) -> str:
    return "(" + ", ".join(f"{n} {t}".strip() for n, t in cols) + ")"


def _analyse(
    store: Store, definition: DynamicTableSpec, runner: Submitter | None, spark_conn_id: str
) -> dict[str, Any]:
    """Spark's analysis of ``definition``'s query: ``{"schema", "source_tables"}``; nothing is created."""
    from airflow_tablemgmt.factories.dynamic import analyse_job

    if runner is None:
        from airflow_tablemgmt.hooks.spark_job import SparkJobHook

        runner = SparkJobHook(spark_conn_id)
    catalog = store.catalogs.get(definition.catalog)
    result = runner.submit(analyse_job(definition, catalog))
    if not result.ok:
        raise InvalidInput(f"query: Spark rejected the query of {definition.id}: {result.error}")
    return dict(result.summary or {})


def drop(
    store: Store,
    table_id: str,
    purge: bool = False,
    runner: Submitter | None = None,
    pauser: DagPauser | None = None,
    *,
    spark_conn_id: str = "spark_default",
) -> DynamicTable:
    """Remove the workflow first (DAG paused, registration removed: the DAG file no longer builds it),
    then, only with ``purge``, drop the Iceberg table and its files. History stays."""
    dt = _load(store, table_id)
    _check_store_owned(dt)
    if pauser is not None:
        pauser(dag_id_for(table_id, REFRESH), True)
    store.dynamic.delete(table_id, Owner(dt.managed_by))
    if purge:
        from airflow_tablemgmt.factories.dynamic import drop_job

        if runner is None:
            from airflow_tablemgmt.hooks.spark_job import SparkJobHook

            runner = SparkJobHook(spark_conn_id)
        result = runner.submit(drop_job(dt.definition, store.catalogs.get(dt.definition.catalog)))
        if not result.ok:
            raise JobFailed(
                f"dynamic table {table_id}: the workflow was removed, but purging the table failed: "
                f"{result.error}"
            )
    return dt


# -- refresh -------------------------------------------------------------------------------------------


def check_refresh(
    dt: DynamicTable,
    *,
    is_periodic: bool,
    schedule_time: str | datetime | None,
    static_partitions: Mapping[str, Any] | None,
    dynamic_options: Mapping[str, Any] | None,
) -> tuple[datetime, dict[str, str], dict[str, str]]:
    """Validate a refresh request as FLIP-435 does: ``(instant, static partitions, options)``."""
    when = parse_schedule_time(schedule_time)
    if is_periodic and when is None:
        raise InvalidInput(PERIODIC_NEEDS_SCHEDULE_TIME)
    partitions = _check_options(static_partitions, "staticPartitions")
    keys = list(dt.definition.partitioned_by)
    unknown = sorted(set(partitions) - set(keys))
    if unknown:
        raise InvalidInput(
            f"staticPartitions: {', '.join(repr(u) for u in unknown)} "
            f"{'is not a partition key' if len(unknown) == 1 else 'are not partition keys'} of "
            f"{dt.id}; partition keys: {', '.join(keys) or '(none: the table is not partitioned)'}"
        )
    options = _check_options(dynamic_options, "dynamicOptions")
    instant = when if is_periodic and when is not None else datetime.now(UTC).replace(microsecond=0)
    return instant, partitions, options


_RUN_NOT_CREATED = "the refresh DAG run could not be created"


def _run_never_created(process: Process) -> bool:
    """A refresh process that failed because Airflow refused its DAG run (so nothing ever ran)."""
    return process.status == ProcessStatus.FAILED and (process.failure_reason or "").startswith(
        _RUN_NOT_CREATED
    )


def refresh(
    store: Store,
    table_id: str,
    *,
    is_periodic: bool,
    schedule_time: str | datetime | None,
    static_partitions: Mapping[str, Any] | None,
    dynamic_options: Mapping[str, Any] | None,
    trigger: RefreshDagTrigger,
    cluster_info: Mapping[str, Any] | None = None,
) -> RefreshRequested:
    """Ask Airflow for a refresh run (REST's path): validate, open the PENDING process at the instant
    (the schedule time when periodic, else now), trigger the refresh DAG with the conf, return at once.

    The same periodic schedule time asked twice is the same process: the second call answers with it
    and triggers nothing.
    """
    dt = _load(store, table_id)
    instant, partitions, options = check_refresh(
        dt, is_periodic=is_periodic, schedule_time=schedule_time,
        static_partitions=static_partitions, dynamic_options=dynamic_options,
    )  # fmt: skip
    dag_id = dag_id_for(table_id, REFRESH)
    params = refresh_parameters("MANUAL", is_periodic, instant, partitions, options)
    conf = {k: params[k] for k in ("trigger", "is_periodic", "static_partitions", "dynamic_options")}
    conf["schedule_time"] = params["schedule_time"]
    existing = store.processes.find(table_id, REFRESH, instant)
    if existing is not None and not _run_never_created(existing):
        return RefreshRequested(existing, dag_id, existing.run_id, dict(cluster_info or {}), reused=True)
    if existing is not None:
        # Airflow refused the run last time: nothing ran, so asking again triggers it now (the same
        # process, its next attempt) rather than answering with that failure forever.
        try:
            process = store.processes.new_attempt(existing.id, expected=ProcessStatus.FAILED)
        except IllegalTransition:  # another request re-opened it first
            current = store.processes.get(existing.id)
            return RefreshRequested(current, dag_id, current.run_id, dict(cluster_info or {}), reused=True)
    else:
        process, created = store.processes.open(table_id, REFRESH, instant, parameters=params, dag_id=dag_id)
        if not created:
            return RefreshRequested(process, dag_id, process.run_id, dict(cluster_info or {}), reused=True)
    try:
        run_id = trigger(dag_id, instant, conf)
    except Exception as e:
        store.processes.transition(
            process.id, ProcessStatus.FAILED, expected=ProcessStatus.PENDING, attempt=process.attempt,
            failure_reason=f"{_RUN_NOT_CREATED}: {e}",
        )  # fmt: skip
        raise
    return RefreshRequested(store.processes.get(process.id), dag_id, run_id, dict(cluster_info or {}))


def refresh_now(
    store: Store,
    table_id: str,
    *,
    is_periodic: bool = False,
    schedule_time: str | datetime | None = None,
    static_partitions: Mapping[str, Any] | None = None,
    dynamic_options: Mapping[str, Any] | None = None,
    runner: Submitter | None = None,
    spark_conn_id: str = "spark_default",
) -> Process:
    """Refresh here and now (the CLI's ``dt refresh``), validated exactly as :func:`refresh`, recorded
    as the same process (the same periodic schedule time twice returns the first one's outcome)."""
    dt = _load(store, table_id)
    instant, partitions, options = check_refresh(
        dt, is_periodic=is_periodic, schedule_time=schedule_time,
        static_partitions=static_partitions, dynamic_options=dynamic_options,
    )  # fmt: skip
    params = refresh_parameters("MANUAL", is_periodic, instant, partitions, options)
    return _run_now(store, table_id, instant, params, runner, spark_conn_id)
