"""The failure callback of every maintenance and refresh task: decides from the store which events a
final failure makes (``failed``, ``failing-streak``, ``suspended``) and sends them, then measures the
table's health (``unhealthy``, :mod:`airflow_tablemgmt.notifications.health`).

Airflow calls ``on_failure_callback`` once the task has failed for good (after its last retry, or at
once for a failure retries cannot fix, such as a cancel or an automatic suspension), in the task's
process on the worker, where the store (our own database) is reachable. A module-level function rather
than a notifier object on the task: it costs nothing per DAG (the DAG cache pickles it by name) and the
configuration is read when a failure happens, so changing ``[tablemgmt] notify`` needs no re-parse.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.notify import NotifyEvent, NotifySpec
from airflow_tablemgmt.core.outcomes import TableHalted
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.notifications.dispatch import Route, global_notify, routes, send_routed
from airflow_tablemgmt.notifications.events import Notification
from airflow_tablemgmt.notifications.health import after_process

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)
_FAILURES = frozenset({ProcessStatus.FAILED, ProcessStatus.KILLED})
_ENDED = frozenset({ProcessStatus.SUCCESS, ProcessStatus.CANCELED}) | _FAILURES
REFRESH = "refresh"
MAX_STREAK_READ = 1000


def failing_streak(processes: list[Process]) -> int:
    """Consecutive failed processes, newest first, ignoring those still running."""
    streak = 0
    for p in processes:
        status = ProcessStatus(p.status)
        if status not in _ENDED:
            continue
        if status not in _FAILURES:
            break
        streak += 1
    return streak


def decide(
    store: Store,
    table_id: str,
    action: str,
    *,
    table_notify: NotifySpec | None,
    global_spec: NotifySpec | None,
    exception: BaseException | str | None = None,
    dag_id: str | None = None,
    run_id: str | None = None,
) -> list[tuple[Route, Notification]]:
    """Each (route, notification) a final failure of ``table_id``'s ``action`` makes."""
    chosen = routes(table_notify, global_spec)
    if not chosen:
        return []
    history = store.processes.list(table_id=table_id, action=action, limit=MAX_STREAK_READ)
    last = next((p for p in history if ProcessStatus(p.status) in _FAILURES), None)
    streak = failing_streak(history)
    base: dict[str, Any] = {"table": table_id, "action": action, "dag_id": dag_id, "run_id": run_id}
    if last is not None:
        base.update(
            process_id=last.id,
            attempt=last.attempt,
            status=str(last.status),
            reason=last.failure_reason or (str(exception) if exception else None),
        )
    elif exception:
        base["reason"] = str(exception)
    suspended_reason = None
    # The operator's failure when the run's outcome halted the table carries that outcome, typed
    # (operators/maintenance.py): a dynamic table suspended after its failures.
    halted = exception.outcome.halted if isinstance(exception, TableHalted) else None
    if action == REFRESH and halted:
        dt = store.dynamic.find(table_id)
        if dt is not None and str(dt.state) == "SUSPENDED":
            suspended_reason = dt.suspended_reason or "suspended after failures"
            streak = max(streak, int(dt.consecutive_failures or 0))
    out: list[tuple[Route, Notification]] = []
    for route in chosen:
        events = [NotifyEvent.FAILED]
        if streak >= route.failing_streak and streak % route.failing_streak == 0:
            events.append(NotifyEvent.FAILING_STREAK)
        if suspended_reason is not None:
            events.append(NotifyEvent.SUSPENDED)
        for event in events:
            if event in route.events:
                note = Notification(event=event, streak=streak, suspended_reason=suspended_reason, **base)
                out.append((route, note))
    return out


def _run_instant(context: Mapping[str, Any]) -> datetime:
    """The run's process instant, as the operator computes it (``operators.maintenance.run_instant``)."""
    instant = context.get("logical_date")
    if instant is None:
        instant = getattr(context.get("dag_run"), "run_after", None) or datetime.now(UTC)
    return instant  # type: ignore[no-any-return]


def record_unstarted_creation(store: Store, table_id: str, context: Mapping[str, Any]) -> Process | None:
    """A refresh task of a CREATING table that failed for good without its job having run leaves a
    FAILED creation process saying so (``factories.dynamic.record_not_started``). Airflow calls this
    callback from the DAG processor, with no exception in the context, for a task it failed before it
    ever ran (e.g. after waiting in a backed-up executor queue: ``Invalid auth token``)."""
    from airflow_tablemgmt.factories.dynamic import record_not_started

    ti, dag_run = context.get("ti"), context.get("dag_run")
    run_id = getattr(ti, "run_id", None) or getattr(dag_run, "run_id", None)
    exception = context.get("exception")
    if exception is None:
        reason = (
            f"the creation run {run_id} never started: Airflow failed its task before it ran "
            "(e.g. it waited too long in the executor's queue; the scheduler's log says why)"
        )
    else:
        reason = f"the creation run {run_id} ended before its job started: {exception}"
    run_type = getattr(dag_run, "run_type", None)
    run_type = getattr(run_type, "value", run_type)
    return record_not_started(
        store,
        table_id,
        _run_instant(context),
        reason[:2000],
        conf=dict(getattr(dag_run, "conf", None) or {}),
        run_type=str(run_type) if run_type else None,
        dag_id=getattr(ti, "dag_id", None),
        run_id=run_id,
    )


def on_task_failure(context: Mapping[str, Any]) -> None:
    """``on_failure_callback`` of the tasks the DAG factory builds: first a refresh that never started
    is recorded (:func:`record_unstarted_creation`), then the notifications are decided and sent."""
    task = context.get("task")
    table_id, action = getattr(task, "table", None), getattr(task, "action", None)
    if not table_id or not action:
        return
    try:
        global_spec = global_notify()
        from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

        conn_id = getattr(task, "tablemgmt_conn_id", TableMgmtHook.default_conn_name)
        store = TableMgmtHook(conn_id).get_store(create=False)
        if action == REFRESH:
            try:
                recorded = record_unstarted_creation(store, table_id, context)
                if recorded is not None:
                    log.warning("tablemgmt: process %s: %s", recorded.id, recorded.failure_reason)
            except Exception:  # noqa: BLE001 - the notifications still go out
                log.exception("tablemgmt: could not record the unstarted creation run of %s", table_id)
        spec = store.tables.get(table_id)
        table_notify = getattr(spec, "notify", None)
        ti = context.get("ti")
        decided = decide(
            store,
            table_id,
            action,
            table_notify=table_notify,
            global_spec=global_spec,
            exception=context.get("exception"),
            dag_id=getattr(ti, "dag_id", None),
            run_id=getattr(ti, "run_id", None),
        )
    except Exception:  # noqa: BLE001 - a notification problem must not hide the task's own failure
        log.exception("tablemgmt: could not decide the notifications of %s %s", table_id, action)
        return
    send_routed(decided, context)
    # The table is measured after a failed process too: writers may have made it worse since the last one.
    process_id = next((n.process_id for _, n in decided if n.process_id is not None), None)
    after_process(store, table_id, action, context, process_id=process_id)
