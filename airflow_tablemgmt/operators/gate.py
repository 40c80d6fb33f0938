"""The snapshot gate: skip a run when the table has no snapshot newer than the last success.

The checks live here once, as functions: :class:`TableMaintenanceOperator` runs them at the start of
its ``maintain`` task (``gate="snapshot"`` or ``gate="event"``, what the DAG factory builds), and
:class:`SnapshotGateOperator` runs the snapshot check as a task of its own, for DAGs users write.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
from airflow_tablemgmt.store.effective import effective_table

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

#: ``TableMaintenanceOperator(gate=...)``: ``snapshot`` checks the table's current snapshot first;
#: ``event`` first checks that the asset event that started the run is for this action, then the
#: snapshot; ``None`` runs without a check.
GATES = ("snapshot", "event", None)


def event_names_action(triggering_asset_events: Mapping[Any, Iterable[Any]], action: str) -> bool:
    """Whether the asset events that started a run ask for ``action``.

    True for a run without events (the fallback schedule, a manual run) and for an event that names
    no actions (a one-watcher trigger, an event posted by hand): only a per-table watcher's event
    says which actions it is for, and Airflow delivers it to every DAG scheduled on the table asset.
    """
    for events in triggering_asset_events.values():
        for event in events:
            extra = getattr(event, "extra", None) or {}
            payload = extra.get("payload") if isinstance(extra, dict) else None
            actions = payload.get("actions") if isinstance(payload, dict) else None
            if actions is None or action in actions:
                return True
    return not any(True for events in triggering_asset_events.values() for _ in events)


def check_event(table: str, action: str, context: Any) -> None:
    """Skip (:class:`AirflowSkipException`) a run whose watcher event is for other actions of the
    table: this action is held back by its own interval, and the watcher sends it an event of its
    own when that has passed. Reads nothing."""
    events = context.get("triggering_asset_events") or {}
    if event_names_action(events, action):
        return
    named = sorted(
        {
            name
            for evs in events.values()
            for ev in evs
            for name in (((getattr(ev, "extra", None) or {}).get("payload") or {}).get("actions") or {})
        }
    )
    raise AirflowSkipException(
        f"tablemgmt: {table}: the snapshot event is for {', '.join(named)}; {action} is "
        "not due (held back by its own interval, it gets its own event when that has passed)"
    )


def check_snapshot(store: Store, table: str, action: str, log: logging.Logger | Any) -> int | None:
    """Skip (:class:`AirflowSkipException`) when ``table`` is still at the snapshot the last
    successful process of ``action`` left behind; else log and return the current snapshot id.

    Reads with pyiceberg (no JVM; its cost: ``benchmarks/gate_cost.py``); the store holds secret
    references, resolved here, on the worker, for this check only (and masked in logs). A check
    that cannot be made (catalog unreachable, table missing) raises :class:`AirflowException` naming
    the table (or the project's own error, which does), so the task fails and Airflow retries it."""
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
    from airflow_tablemgmt.triggers.format_readers import reader_for, watched_catalog

    try:
        spec = effective_table(store, table)
        reader = reader_for(
            resolve_catalog_spec(watched_catalog(store.catalogs.get(spec.catalog), spec.format))
        )
        last = store.processes.last_successful(table, action)
        last_seen = last.snapshot_id if last else None
        changed, current = reader.has_new_snapshot(TableIdentifier.parse(table), last_seen)
    except TableMgmtError:
        raise  # names the table and what is wrong with it (not found, a secret that does not resolve)
    except Exception as e:
        raise AirflowException(
            f"tablemgmt: could not check the current snapshot of {table} before {action} "
            f"(nothing was started): {type(e).__name__}: {e}"
        ) from e
    if last is not None and not changed:
        raise AirflowSkipException(
            f"tablemgmt: {table} is still at snapshot {current}, which process {last.id} "
            f"({action}) already handled; nothing to do"
        )
    log.info("tablemgmt: %s at snapshot %s (last handled: %s); running %s", table, current, last_seen, action)
    return current


class SnapshotGateOperator(BaseOperator):
    """The snapshot check (:func:`check_snapshot`) as a task of its own, for DAGs written by hand: if
    ``table`` has no snapshot other than the one the last successful process of ``action`` left
    behind, the run ends as *skipped*, not failed. Returns the current snapshot id (XCom).

    The DAGs this provider builds do not use it: their ``maintain`` task makes the same check first
    (``TableMaintenanceOperator(gate=...)``), which saves a task start per run."""

    template_fields: Sequence[str] = ("table", "action")
    ui_color = "#eaf2f8"
    # On the class, set on an instance only when it differs (see TableMaintenanceOperator).
    tablemgmt_conn_id: str = TableMgmtHook.default_conn_name

    def __init__(
        self,
        *,
        table: str,
        action: str,
        tablemgmt_conn_id: str = TableMgmtHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.action = action
        if tablemgmt_conn_id != type(self).tablemgmt_conn_id:
            self.tablemgmt_conn_id = tablemgmt_conn_id

    def execute(self, context: Any) -> int | None:
        store = TableMgmtHook(self.tablemgmt_conn_id).get_store()
        return check_snapshot(store, self.table, self.action, self.log)
