"""Refreshing a dynamic table: FLIP-435's REST refresh (a PENDING process and a DAG run with the
request as conf), the CLI's refresh here and now, and the check both make first.

Refresh processes use the action ``refresh``; their instant is the schedule time (periodic) or now
(manual, creation), so the same periodic schedule time asked twice is one process. The request's
encoding (parameters, conf, schedule time) is :mod:`airflow_tablemgmt.core.dynamic.refresh`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.dynamic.refresh import (
    REFRESH,
    format_schedule_time,
    refresh_conf,
    refresh_parameters,
    requested_trigger,
)
from airflow_tablemgmt.core.errors import IllegalTransition
from airflow_tablemgmt.core.instants import DAG_START_DATE, RUN_SKEW
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.services.dynamic.views import (
    RefreshDagTrigger,
    RefreshRequested,
    check_options,
    load_table,
    parse_schedule_time,
)
from airflow_tablemgmt.services.errors import Conflict, InvalidInput
from airflow_tablemgmt.services.run_now import dag_id_for

if TYPE_CHECKING:
    from airflow_tablemgmt.lifecycle import Submitter
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.dynamic import DynamicTable

__all__ = ["refresh_parameters"]  # re-exported: core.dynamic.refresh

PERIODIC_NEEDS_SCHEDULE_TIME = "Schedule time must be specified for periodic refresh."
_FLIP_SCHEDULE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")  # SCHEDULE_TIME_FORMAT


def check_not_suspended(dt: DynamicTable) -> None:
    """A SUSPENDED table takes no requested refresh (its DAG is paused: the run would wait for a
    resume), so the request is refused before any process opens: :class:`Conflict` on ``state``."""
    from airflow_tablemgmt.store.dynamic import SUSPENDED

    if str(dt.state) == SUSPENDED:
        raise Conflict(
            f"state: dynamic table {dt.id} is suspended ({dt.suspended_reason or 'no reason'}); "
            "resume it first (POST .../resume)"
        )


def run_refresh_here(
    store: Store,
    table_id: str,
    instant: datetime,
    parameters: dict[str, Any],
    runner: Submitter | None,
    spark_conn_id: str,
) -> Process:
    """Run the refresh process at ``instant`` here (the CLI's and creation's path), as ``run_now`` does."""
    from airflow_tablemgmt.factories.discovery import default_factories
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
    from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest

    if runner is None:
        from airflow_tablemgmt.hooks.spark_job import SparkJobHook

        runner = SparkJobHook(spark_conn_id)
    process_runner = ProcessRunner(store, default_factories(), runner, resolve_catalog=resolve_catalog_spec)
    outcome = process_runner.run(
        RunRequest(table_id, REFRESH, instant, holder="tablemgmt-dt", parameters=parameters)
    )
    return outcome.process


def check_schedule_time(
    value: str | datetime | None, field: str = "scheduleTime", now: datetime | None = None
) -> datetime | None:
    """A refresh's schedule time, checked as run-now instants are (:mod:`airflow_tablemgmt.core.instants`):
    FLIP-435's ``yyyy-MM-dd HH:mm:ss`` (UTC by definition) or an ISO 8601 time *with* a time zone,
    within [the refresh DAG's start, now + a few minutes]. It becomes the DAG run's logical date and
    the process key: Airflow never starts a run in the future (and it would hold the DAG's one active
    run), and one before the DAG's start is a run its scheduler never meant. A number (``-1615`` would
    read as 1969), a boolean or a naive ISO time is refused. None stays None."""
    if value is None:
        return None
    now = now or datetime.now(UTC)
    latest = (now + RUN_SKEW).replace(microsecond=0)
    allowed = (
        f"allowed: 'yyyy-MM-dd HH:mm:ss' (UTC) or an ISO 8601 time with a time zone, between "
        f"{format_schedule_time(DAG_START_DATE)} (the refresh DAG's start) and {format_schedule_time(latest)} "
        f"(now + {int(RUN_SKEW.total_seconds() // 60)} minutes), e.g. 2026-02-01 00:00:00"
    )
    if not isinstance(value, str | datetime):
        kind = (
            "a number"
            if isinstance(value, int | float) and not isinstance(value, bool)
            else type(value).__name__
        )
        raise InvalidInput(f"{field}: {value!r} is {kind}, not a time; {allowed}")
    naive = value.tzinfo is None if isinstance(value, datetime) else _naive_iso(value)
    if naive:
        raise InvalidInput(f"{field}: {value!r} has no time zone (add one, e.g. +00:00); {allowed}")
    when = parse_schedule_time(value, field)
    assert when is not None
    if when < DAG_START_DATE:
        raise InvalidInput(f"{field}: {value_text(value)} is before the refresh DAG's start; {allowed}")
    if when > latest:
        raise InvalidInput(
            f"{field}: {value_text(value)} is in the future (Airflow would never start its run); {allowed}"
        )
    return when


def value_text(value: str | datetime) -> str:
    return repr(value.isoformat()) if isinstance(value, datetime) else repr(value)


def _naive_iso(text: str) -> bool:
    """An ISO 8601 time without a zone (FLIP-435's own format is UTC by definition, so it is not)."""
    text = text.strip()
    if _FLIP_SCHEDULE_TIME.match(text):
        return False
    try:
        return datetime.fromisoformat(text).tzinfo is None
    except ValueError:
        return False  # not a time at all: the parser says so


def check_refresh(
    dt: DynamicTable,
    *,
    is_periodic: bool,
    schedule_time: str | datetime | None,
    static_partitions: Mapping[str, Any] | None,
    dynamic_options: Mapping[str, Any] | None,
) -> tuple[datetime, dict[str, str], dict[str, str]]:
    """Validate a refresh request as FLIP-435 does: ``(instant, static partitions, options)``."""
    when = check_schedule_time(schedule_time)
    if is_periodic and when is None:
        raise InvalidInput(PERIODIC_NEEDS_SCHEDULE_TIME)
    partitions = check_options(static_partitions, "staticPartitions")
    keys = list(dt.definition.partitioned_by)
    unknown = sorted(set(partitions) - set(keys))
    if unknown:
        raise InvalidInput(
            f"staticPartitions: {', '.join(repr(u) for u in unknown)} "
            f"{'is not a partition key' if len(unknown) == 1 else 'are not partition keys'} of "
            f"{dt.id}; partition keys: {', '.join(keys) or '(none: the table is not partitioned)'}"
        )
    options = check_options(dynamic_options, "dynamicOptions")
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
    and triggers nothing. A table still CREATING is created by the run: its process records trigger
    CREATION, not MANUAL.
    """
    dt = load_table(store, table_id)
    check_not_suspended(dt)
    instant, partitions, options = check_refresh(
        dt,
        is_periodic=is_periodic,
        schedule_time=schedule_time,
        static_partitions=static_partitions,
        dynamic_options=dynamic_options,
    )
    dag_id = dag_id_for(table_id, REFRESH)
    params = refresh_parameters(requested_trigger(dt.state), is_periodic, instant, partitions, options)
    conf = refresh_conf(params)
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
            process.id,
            ProcessStatus.FAILED,
            expected=ProcessStatus.PENDING,
            attempt=process.attempt,
            failure_reason=f"{_RUN_NOT_CREATED}: {e}",
        )
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
    as the same process (the same periodic schedule time twice returns the first one's outcome). A table
    still CREATING is created by it, recorded with trigger CREATION (as by :func:`refresh`)."""
    dt = load_table(store, table_id)
    instant, partitions, options = check_refresh(
        dt,
        is_periodic=is_periodic,
        schedule_time=schedule_time,
        static_partitions=static_partitions,
        dynamic_options=dynamic_options,
    )
    params = refresh_parameters(requested_trigger(dt.state), is_periodic, instant, partitions, options)
    return run_refresh_here(store, table_id, instant, params, runner, spark_conn_id)
