"""Dynamic tables as the CLI and REST show them (views, history rows), the reads, and the checks
every change shares (the definition, options, upstreams, who owns the table).

What only Airflow can do is the caller's part, passed in as callables (this package imports no
Airflow): a :class:`RefreshDagTrigger` creates a DAG run of the table's refresh DAG with a conf; a
:class:`DagPauser` pauses or unpauses that DAG (suspend / resume / drop).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from airflow_tablemgmt.core.dynamic.refresh import REFRESH, format_schedule_time
from airflow_tablemgmt.core.dynamic.refresh import parse_schedule_time as _parse_schedule_time
from airflow_tablemgmt.core.errors import InvalidDeclaration, TableManagedByCode, TableNotFound
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.query_policy import session_option_refusal
from airflow_tablemgmt.core.tables import Owner, format_validation_error
from airflow_tablemgmt.services.errors import Conflict, InvalidInput, NotFound
from airflow_tablemgmt.services.run_now import dag_id_for

if TYPE_CHECKING:
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.dynamic import DynamicTable

__all__ = ["format_schedule_time"]  # re-exported: the one format, core.dynamic.refresh


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

    @property
    def refresh_mode(self) -> dict[str, Any]:
        """The declared mode, the mode its refreshes get and why (:func:`refresh_mode_view`)."""
        return refresh_mode_view(self.table)

    def to_dict(self) -> dict[str, Any]:
        out = self.table.to_dict()
        out.update(
            dag_id=self.dag_id,
            freshness=self.freshness,
            cron=self.cron,
            refresh_mode=self.refresh_mode,
            last_refresh=history_row(self.last_refresh) if self.last_refresh else None,
        )
        return out


def refresh_mode_view(dt: DynamicTable) -> dict[str, Any]:
    """``{"declared", "mode", "reason", "incremental"}``: the table's ``refresh-mode``, the mode its
    refreshes get from the last analysis of its query and why (``core.dynamic.incremental.plan_mode``),
    and that analysis (null until a refresh analysed the current query). ``INCREMENTAL`` declared on a
    query the analysis found cannot be maintained so: mode null, the refusal as the reason (its next
    refresh fails with it)."""
    from airflow_tablemgmt.core.dynamic.incremental import Analysis, IncrementalNotPossible, plan_mode

    declared = str(dt.definition.refresh_mode)
    analysis = Analysis.from_dict(dt.incremental) if dt.incremental is not None else None
    try:
        planned = plan_mode(declared, analysis)
        mode, reason = planned.mode, planned.reason
    except IncrementalNotPossible as e:
        mode, reason = None, str(e)
    return {"declared": declared, "mode": mode, "reason": reason, "incremental": dt.incremental}


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
        # The mode the refresh ran in and why it was not incremental (issue 41); null before it ran, and
        # for a NO_DATA refresh, which ran nothing.
        "refresh_mode": s.get("refresh_mode"),
        "refresh_mode_reason": s.get("refresh_mode_reason"),
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


# -- parsing and checks ---------------------------------------------------------------------------------


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
    """FLIP-435's ``yyyy-MM-dd HH:mm:ss`` (UTC); ISO 8601 is accepted too. None stays None. The one
    parser (:func:`airflow_tablemgmt.core.dynamic.refresh.parse_schedule_time`); a bad value is
    :class:`InvalidInput`."""
    try:
        return _parse_schedule_time(value, field)
    except ValueError as e:
        raise InvalidInput(str(e)) from None


def check_options(options: Mapping[str, Any] | None, field: str) -> dict[str, str]:
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


def check_store_owned(dt: DynamicTable) -> None:
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
    edges = {
        tid: set(dt.definition.upstream_candidates(set(others) | {definition.id}) - {tid})
        for tid, dt in others.items()
    }
    edges[definition.id] = set(upstream)
    cycle = find_cycle(edges)
    if cycle:
        raise InvalidInput(f"query: dynamic tables would read each other in a cycle: {' -> '.join(cycle)}")
    return upstream


# -- reads ---------------------------------------------------------------------------------------------


def load_table(store: Store, table_id: str) -> DynamicTable:
    """The dynamic table, or :class:`NotFound` naming close matches."""
    from airflow_tablemgmt.store.dynamic import NotADynamicTable

    try:
        return store.dynamic.get(table_id)
    except TableNotFound as e:
        raise NotFound(str(e)) from None
    except NotADynamicTable as e:
        raise NotFound(str(e)) from None


def get(store: Store, table_id: str) -> DynamicTableView:
    dt = load_table(store, table_id)
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
            load_table(store, table_id)  # NotFound naming close matches
    return store.processes.list(table_id=table_id, action=REFRESH, limit=limit)
