"""Declaring a dynamic table without running its query here (REST's ``POST /dynamic-tables``).

A dynamic table's query is user code (DESIGN: *User SQL is user code*): it runs only where refreshes
run, in the refresh DAG's task on a worker, whose Spark job checks its plan first. The api-server
therefore never starts Spark for a creation: :func:`declare` validates the definition and stores it
CREATING, and :func:`queue_creation` opens the creation process (trigger CREATION) and asks Airflow for
a run of the refresh DAG, which creates the table. The caller follows the process (``GET
/processes/{id}``, ``GET /dynamic-tables/{id}``); a failed creation leaves the table CREATING with the
failed process in its history (its reason sanitized by the job), to be altered or dropped.

The CLI's ``tablemgmt dt create`` still creates at once in its own process (``services.dynamic.create``,
through :func:`declare`): it runs with its user's own environment, not a server's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.services.errors import Conflict

if TYPE_CHECKING:
    from airflow_tablemgmt.services.dynamic import RefreshRequested
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.dynamic import DynamicTable

CREATION = "CREATION"
RUN_NOT_CREATED = "the creation DAG run could not be created"


def declare(store: Store, definition_dict: Mapping[str, Any], owner: Owner = Owner.STORE) -> DynamicTable:
    """Validate the definition (fields, catalog, no clash, upstreams) and store it CREATING. No Spark."""
    from airflow_tablemgmt.services.dynamic import check_upstreams, parse_definition
    from airflow_tablemgmt.store.dynamic import CREATING

    definition = parse_definition(definition_dict)
    store.catalogs.get(definition.catalog)  # CatalogNotFound names the registered ones
    existing = store.dynamic.find(definition.id)
    if existing is not None:
        raise Conflict(f"dynamic table {definition.id} already exists ({existing.state}); alter or drop it")
    if definition.id in {t.spec.id for t in store.tables.list()}:
        raise Conflict(f"table {definition.id} is registered as a plain table; remove it first")
    check_upstreams(store, definition)
    store.dynamic.upsert(definition, owner, state=CREATING)
    return store.dynamic.get(definition.id)


def queue_creation(
    store: Store, table_id: str, trigger: Callable[[str, datetime, Mapping[str, Any]], str]
) -> RefreshRequested:
    """Open the creation process (now, trigger CREATION) and ask ``trigger`` (a ``RefreshDagTrigger``:
    dag id, logical date, conf -> run id) for the refresh DAG's run.

    Airflow refusing the run fails the process with that reason (nothing ran) and raises."""
    from airflow_tablemgmt.services.dynamic import REFRESH, RefreshRequested, refresh_parameters
    from airflow_tablemgmt.services.run_now import dag_id_for

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
            process.id, ProcessStatus.FAILED, expected=ProcessStatus.PENDING, attempt=process.attempt,
            failure_reason=f"{RUN_NOT_CREATED}: {type(e).__name__}",
        )  # fmt: skip
        raise
    return RefreshRequested(store.processes.get(process.id), dag_id, run_id)
