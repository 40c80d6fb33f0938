"""The ``unhealthy`` notification: a table's health score crossed below ``health-below``.

**Where it is evaluated.** On the worker, right after each maintenance or refresh process of the table
ends: the operator calls :func:`after_process` when its process succeeded, and the failure callback
(``notifications/callback.py``) when a task failed for good. The process is what changes a table's files
and snapshots (a refresh or a writer's appends make small files, a compaction removes them), and the
worker reads the table's metadata there (no JVM; the format's health hook, or pyiceberg for Iceberg), once, and only when some route asks for
``unhealthy``. Health reads made for the REST API and the page (``services/health.py``) send nothing:
an api-server would send mail because someone opened a page.

**Once per crossing.** The last state per (table, threshold) is in the store (``tms_health_alert``,
:class:`~airflow_tablemgmt.store.health_alerts.HealthAlertRepository`); the worker whose guarded update
flips it to *below* sends, so two workers measuring the same table do not both send, and a table that
stays below sends nothing more until a measurement finds it at the threshold or above (recovered) and a
later one below again. A table measured for the first time counts as crossing when it is below.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.notify import NotifyEvent, NotifySpec
from airflow_tablemgmt.notifications.dispatch import Route, global_notify, routes, send
from airflow_tablemgmt.notifications.events import Notification
from airflow_tablemgmt.store.effective import effective_table

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import TableSpec
    from airflow_tablemgmt.metadata.health import HealthScore
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)
HealthReader = Callable[["Store", "TableSpec"], "HealthScore"]


def read_health(store: Store, spec: TableSpec) -> HealthScore:
    """The table's score, read now from its metadata without a JVM (the catalog's secrets resolved): its
    format's health hook, else the Iceberg file figures (``factories/health.py``, as the page reads it)."""
    from airflow_tablemgmt.factories.health import read_health, score_of
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec

    return score_of(read_health(resolve_catalog_spec(store.catalogs.get(spec.catalog)), spec))


def health_routes(table_notify: NotifySpec | None, global_spec: NotifySpec | None) -> list[Route]:
    """The routes that take ``unhealthy`` (the table's own, then the global ones unless it opted out)."""
    return [r for r in routes(table_notify, global_spec) if NotifyEvent.UNHEALTHY in r.events]


def decide_health(
    store: Store,
    spec: TableSpec,
    health: HealthScore,
    chosen: list[Route],
    **base: Any,
) -> list[tuple[Route, Notification]]:
    """Record ``health`` against each threshold of ``chosen`` and return the notifications of the
    thresholds this call found crossed (those whose state it flipped to below)."""
    from airflow_tablemgmt.store.health_alerts import HealthAlertRepository

    alerts = HealthAlertRepository.of(store)
    enabled = set(spec.enabled_actions())
    findings = tuple({**f.to_dict(), "enabled": f.action in enabled} for f in health.findings)
    out: list[tuple[Route, Notification]] = []
    for threshold in sorted({r.health_below for r in chosen}):
        if not alerts.record(spec.id, threshold, health.score) or health.score >= threshold:
            continue  # unchanged, or recovered: nothing is sent on recovery
        for route in (r for r in chosen if r.health_below == threshold):
            note = Notification(
                event=NotifyEvent.UNHEALTHY,
                table=spec.id,
                health_score=health.score,
                health_below=threshold,
                findings=findings,
                **base,
            )
            out.append((route, note))
    return out


def evaluate(
    store: Store,
    table_id: str,
    action: str,
    *,
    global_spec: NotifySpec | None,
    read: HealthReader = read_health,
    **base: Any,
) -> list[tuple[Route, Notification]]:
    """What measuring ``table_id`` now (after a process of ``action``) makes: nothing at all, not even a
    metadata read, when no route takes ``unhealthy``."""
    spec = effective_table(store, table_id)
    chosen = health_routes(getattr(spec, "notify", None), global_spec)
    if not chosen:
        return []
    health = read(store, spec)
    return decide_health(store, spec, health, chosen, action=action, page=page_url(table_id), **base)


def page_url(table_id: str) -> str:
    """The table's page inside Airflow (``[api] base_url`` when set, else a path on the api-server)."""
    try:
        from airflow.sdk.configuration import conf

        base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    except Exception:  # noqa: BLE001 - a link is a convenience, never a reason not to send
        base = ""
    return f"{base}/plugin/tablemgmt#/tables/{table_id}"


def after_process(
    store: Store,
    table_id: str,
    action: str,
    context: Mapping[str, Any] | None = None,
    *,
    process_id: int | None = None,
    read: HealthReader = read_health,
) -> int:
    """Measure ``table_id`` after a process of ``action`` ended and send ``unhealthy`` if it crossed;
    returns how many notifications were sent. Never raises: the process's outcome is what the task
    reports, whatever happens here (an unreadable table, a broken notifier) is logged."""
    context = context or {}
    ti = context.get("ti")
    try:
        decided = evaluate(
            store,
            table_id,
            action,
            global_spec=global_notify(),
            read=read,
            process_id=process_id,
            dag_id=getattr(ti, "dag_id", None),
            run_id=getattr(ti, "run_id", None),
        )
    except TableMgmtError as e:  # e.g. HealthUnavailable: a format or catalog pyiceberg cannot read
        log.info("tablemgmt: health of %s not measured after %s: %s", table_id, action, e)
        return 0
    except Exception:  # noqa: BLE001 - see the docstring
        log.exception("tablemgmt: could not evaluate the health of %s after %s", table_id, action)
        return 0
    sent = 0
    for route, notification in decided:
        n = send(route.notifiers, notification, context)
        log.info(
            "tablemgmt: %s sent through %d of %d notifier(s)", notification.subject, n, len(route.notifiers)
        )
        sent += n
    return sent
