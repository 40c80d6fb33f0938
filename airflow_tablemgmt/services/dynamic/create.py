"""Creating a dynamic table, two ways.

A dynamic table's query is user code (DESIGN: *User SQL is user code*): it runs only where refreshes
run, in the refresh DAG's task on a worker, whose Spark job checks its plan first. The api-server
therefore never starts Spark for a creation: :func:`declare` validates the definition and stores it
CREATING, and :func:`queue_creation` opens the creation process (trigger CREATION) and asks Airflow for
a run of the refresh DAG, which creates the table. The caller follows the process (``GET
/processes/{id}``). A creation that fails for good is not left CREATING: the worker removes the
registration (and with it the refresh DAG; ``factories.dynamic``'s ``on_finished``), the failed process
stays in the history with its reason (sanitized by the job). A creation run Airflow fails before it
ever runs is recorded FAILED by the refresh task's failure callback, and the table stays CREATING for
its DAG's next run (``factories.dynamic.record_not_started``). A POST that fails before its run was
queued leaves nothing behind either: :func:`abandon` removes the registration and pauses a DAG Airflow
already had.

The CLI's ``tablemgmt dt create`` (:func:`create`) still creates at once in its own process, through
:func:`declare`: it runs with its user's own environment, not a server's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.dynamic.refresh import CREATION, REFRESH, refresh_parameters
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.services.dynamic.changes import declare
from airflow_tablemgmt.services.dynamic.refresh import run_refresh_here
from airflow_tablemgmt.services.dynamic.views import RefreshRequested
from airflow_tablemgmt.services.run_now import dag_id_for

if TYPE_CHECKING:
    from airflow_tablemgmt.lifecycle import Submitter
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.dynamic import DynamicTable

log = logging.getLogger("airflow_tablemgmt.services.dynamic")

RUN_NOT_CREATED = "the creation DAG run could not be created"


def create(
    store: Store,
    definition_dict: Mapping[str, Any],
    runner: Submitter | None = None,
    owner: Owner = Owner.STORE,
    *,
    spark_conn_id: str = "spark_default",
) -> tuple[DynamicTable, Process]:
    """Validate, create the Iceberg table and run its first refresh (trigger CREATION) now, here (the
    CLI's path; REST queues it on a worker: :func:`queue_creation`), through the same process
    path as every run; on success the table is ACTIVE with the schema and source tables
    Spark found. On failure nothing is left: the Spark job drops what it created, the registration is
    removed, and the error says why (the failed process stays in the history)."""
    definition = declare(store, definition_dict, owner).definition
    instant = datetime.now(UTC).replace(microsecond=0)
    params = refresh_parameters(CREATION, False, instant, {}, {})
    try:
        outcome = run_refresh_here(store, definition.id, instant, params, runner, spark_conn_id)
    except Exception:
        _forget(store, definition.id, owner)
        raise
    dt = store.dynamic.get(definition.id)
    return dt, outcome


def _forget(store: Store, table_id: str, owner: Owner) -> None:
    try:
        if store.dynamic.find(table_id) is not None:  # the failed run may have removed it already
            store.dynamic.delete(table_id, owner)
    except Exception:  # noqa: BLE001 - the original failure is the one to report
        log.warning("tablemgmt: could not remove the failed dynamic table %s", table_id, exc_info=True)


def abandon(store: Store, table_id: str, pauser: Callable[[str, bool], None] | None) -> None:
    """Undo a declaration whose creation could not be queued (REST's POST failed after storing it):
    pause the refresh DAG where Airflow has one, so no run starts before the DAG file drops it, and
    remove the registration. Never raises: the original failure is the one to report."""
    if pauser is not None:
        try:
            pauser(dag_id_for(table_id, REFRESH), True)
        except Exception:  # noqa: BLE001
            log.warning("tablemgmt: could not pause the refresh DAG of %s", table_id, exc_info=True)
    _forget(store, table_id, Owner.STORE)


def queue_creation(
    store: Store, table_id: str, trigger: Callable[[str, datetime, Mapping[str, Any]], str]
) -> RefreshRequested:
    """Open the creation process (now, trigger CREATION) and ask ``trigger`` (a ``RefreshDagTrigger``:
    dag id, logical date, conf -> run id) for the refresh DAG's run.

    Airflow refusing the run fails the process with that reason (nothing ran) and raises."""
    dag_id = dag_id_for(table_id, REFRESH)
    instant = datetime.now(UTC).replace(microsecond=0)
    params = refresh_parameters(CREATION, False, instant, {}, {})
    conf = {k: params[k] for k in ("trigger", "is_periodic", "schedule_time", "static_partitions")}
    process, created = store.processes.open(table_id, REFRESH, instant, parameters=params, dag_id=dag_id)
    if not created:  # asked twice within a second: the same creation
        return RefreshRequested(process, dag_id, process.run_id, reused=True)
    try:
        run_id = trigger(dag_id, instant, conf)
    except Exception as e:
        store.processes.transition(
            process.id,
            ProcessStatus.FAILED,
            expected=ProcessStatus.PENDING,
            attempt=process.attempt,
            failure_reason=f"{RUN_NOT_CREATED}: {type(e).__name__}",
        )
        raise
    return RefreshRequested(store.processes.get(process.id), dag_id, run_id)
