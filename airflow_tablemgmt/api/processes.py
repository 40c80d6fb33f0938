"""``/processes``: list (filters, paging), get, cancel, reap."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import APIRouter, Depends, Path, Query, Request

from airflow_tablemgmt.api.airflow_side import authorize_dags
from airflow_tablemgmt.api.deps import get_store, user_name
from airflow_tablemgmt.api.errors import ApiError
from airflow_tablemgmt.api.schemas import CancelOut, ProcessOut, ProcessPage
from airflow_tablemgmt.api.views import process_out
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.text import TEXT_PATTERN
from airflow_tablemgmt.services import cancel_process, get_process, list_processes
from airflow_tablemgmt.services.reap import reap_processes
from airflow_tablemgmt.services.run_now import dag_id_for

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)
router = APIRouter(prefix="/processes", tags=["processes"])
StoreDep = Annotated["Store", Depends(get_store)]
ProcessId = Annotated[int, Path(ge=1, le=2**63 - 1)]


@router.get("", response_model=ProcessPage)
def get_processes(
    store: StoreDep,
    table: Annotated[
        str | None,
        Query(pattern=TEXT_PATTERN, min_length=1, max_length=800, description="catalog.namespace.table"),
    ] = None,
    action: Annotated[str | None, Query(pattern=TEXT_PATTERN, min_length=1, max_length=100)] = None,
    status: ProcessStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
) -> ProcessPage:
    """Processes, newest instant first."""
    found = list_processes(store, table=table, action=action, status=status, limit=limit + offset)
    return ProcessPage(items=[process_out(p) for p in found[offset:]], limit=limit, offset=offset)


@router.post("/reap")
def reap(
    request: Request,
    user: GetUserDep,
    store: StoreDep,
    stale_after_s: Annotated[float, Query(gt=0, le=86_400)] = 90,
    pending_after_s: Annotated[float, Query(gt=0, le=86_400 * 7)] = 900,
) -> list[dict[str, Any]]:
    """Close processes whose worker is gone (``tablemgmt reap``, the same service). Needs permission on
    every DAG's runs: it may close any table's process."""
    authorize_dags(request, user, "PUT", [None], run=True)
    reaped = reap_processes(
        store, stale_after=timedelta(seconds=stale_after_s), pending_after=timedelta(seconds=pending_after_s)
    )
    return [r.to_dict() for r in reaped]


# ``:int``: only digits reach these routes, so ``GET /processes/reap`` is the 405 of ``POST /reap``
# (Allow: POST), not a 422 about a process id.
@router.get("/{process_id:int}", response_model=ProcessOut)
def get_one(process_id: ProcessId, store: StoreDep) -> ProcessOut:
    return process_out(get_process(store, process_id))


@router.post("/{process_id:int}/cancel", response_model=CancelOut)
def cancel(process_id: ProcessId, request: Request, user: GetUserDep, store: StoreDep) -> CancelOut:
    """PENDING ends CANCELED at once, and its DAG run, if still queued, is marked failed; SUBMITTED/RUNNING
    turn CANCELING and the running task stops its job. Needs permission on the action DAG's runs. A
    finished process answers 409."""
    p = get_process(store, process_id)
    authorize_dags(request, user, "PUT", [p.dag_id or dag_id_for(p.table_id, p.action)], run=True)
    if p.status.is_terminal:
        raise ApiError(
            409, "status", f"status: process {process_id} is {p.status}, finished; nothing to cancel"
        )
    result = cancel_process(store, process_id, source=f"the REST API by {user_name(user)}")
    if result.status == ProcessStatus.CANCELED and p.run_id:
        # Its DAG run never started: end it too, or it holds the DAG's one active run indefinitely.
        from airflow_tablemgmt.api.airflow_side import end_queued_run

        if end_queued_run(p.dag_id or dag_id_for(p.table_id, p.action), p.run_id):
            log.info("tablemgmt: process %s canceled; its queued DAG run %s ended", process_id, p.run_id)
    return CancelOut(process_id=process_id, status=result.status, accepted=result.accepted)
