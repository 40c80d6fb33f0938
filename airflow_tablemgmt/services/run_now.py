"""Run an action now through the scheduler: validate, trigger the action's DAG, record the process.

The CLI's ``run-now`` runs the job in its own process (``services.processes.run_now``); the REST API
cannot (an api-server must not run Spark), so it asks Airflow for a DAG run of the action's DAG at
``instant`` and creates the process row up front, PENDING, keyed by (table, action, instant). The
task that runs later opens the same key and resumes that row, so the caller gets the process id at
once and never a second process for the same instant.

A table a policy enrolled has no DAG of its own: its run is a run of its policy's planned DAG
(``tms__plan__<policy>__<action>``) whose ``conf`` names the table, which runs it whatever its stored health
(docs/planning.md); the process opened here is the one that run's batch resumes.

How the DAG run is created is the caller's part (a :class:`DagTrigger`): this module imports no
Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.instants import InvalidInstant, check_run_instant
from airflow_tablemgmt.core.naming import dag_id_for as dag_id_for  # re-exported: the services and api use it
from airflow_tablemgmt.core.naming import plan_dag_id
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.services.errors import DuplicateRun, InvalidInput
from airflow_tablemgmt.store.effective import effective_table

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store


class DagTrigger(Protocol):
    def __call__(self, dag_id: str, logical_date: datetime, conf: Mapping[str, Any] | None = None) -> str:
        """Create a DAG run at ``logical_date`` (with ``conf``, when given) and return its run id.

        Raises :class:`DuplicateRun` when that DAG already has a run at that instant.
        """


@dataclass(frozen=True)
class RunRequested:
    process: Process
    dag_id: str
    run_id: str


def check_runnable(store: Store, table_id: str, action: str) -> str:
    """The action's DAG id, when the live table has ``action`` enabled; else a message saying why not."""
    ACTIONS.get(action)  # unknown names fail with the list of known ones
    spec = effective_table(store, table_id)  # an action a policy enables is runnable too
    enabled = spec.enabled_actions()
    if action not in enabled:
        raise InvalidInput(
            f"action: {action!r} is not enabled on table {table_id}; enabled: {', '.join(enabled) or '(none)'}"
        )
    policy = _enrolled_by(store, table_id)
    if policy is not None:  # no DAG of its own: its policy's planned DAG runs it (ADR 0004, docs/planning.md)
        return plan_dag_id(policy, action)
    return dag_id_for(table_id, action)


def _enrolled_by(store: Store, table_id: str) -> str | None:
    """The policy that enrolled ``table_id``, or None for a declared table."""
    row = store.tables.get_registered(table_id)
    return row.policy if row.managed_by == Owner.POLICY and row.policy else None


def request_run(
    store: Store, table_id: str, action: str, instant: datetime | str, trigger: DagTrigger
) -> RunRequested:
    """Trigger ``action``'s DAG at ``instant`` and open its PENDING process.

    ``instant`` must be a tz-aware ISO 8601 time within [the DAG's start, now + a few minutes]
    (``core.instants``): Airflow never starts a run in the future, and such a run would block the
    action's later runs. A process that already exists for (table, action, instant) is a
    :class:`DuplicateRun`: the same periodic instant asked twice is one run.
    """
    try:
        instant = check_run_instant(instant)  # Airflow's logical dates have whole seconds
    except InvalidInstant as e:
        raise InvalidInput(str(e)) from None
    dag_id = check_runnable(store, table_id, action)
    existing = store.processes.find(table_id, action, instant)
    if existing is not None:
        raise DuplicateRun(
            f"instant: {action} of {table_id} at {instant.isoformat()} exists already as process "
            f"{existing.id} ({existing.status}); give another instant to run again"
        )
    if _enrolled_by(store, table_id) is not None:  # a run of its policy's planned DAG for this table alone
        run_id = trigger(dag_id, instant, {"tables": [table_id]})
    else:
        run_id = trigger(dag_id, instant)
    process, created = store.processes.open(table_id, action, instant, dag_id=dag_id, run_id=run_id)
    if not created and process.run_id not in (None, run_id):
        raise DuplicateRun(
            f"instant: {action} of {table_id} at {instant.isoformat()} exists already as process {process.id}"
        )
    return RunRequested(process, dag_id, run_id)
