"""``/dynamic-tables``: create, list, get, history, suspend, resume, alter, drop, and FLIP-435's refresh.

Every route is a thin call into ``services.dynamic`` (which the CLI's ``tablemgmt dt`` calls too, so
both answer a bad value with the same message). What only Airflow can do — trigger the refresh DAG,
pause it, check DAG permissions — comes in through :class:`AirflowSide`, a dependency, so the routes
run the same against Airflow's api-server and against a stand-in in unit tests.

``POST /dynamic-tables/{id}/refresh`` is FLIP-435's REST refresh: body ``{"isPeriodic",
"scheduleTime": "yyyy-MM-dd HH:mm:ss", "staticPartitions", "dynamicOptions"}``, answer ``{"jobId",
"dagRunId", "clusterInfo": {"master", "applicationId"}}`` once the refresh is submitted (its process
exists, its DAG run is queued). A bad request is a 400 with the service's message (Flink's, where
Flink has one: "Schedule time must be specified for periodic refresh."); the same periodic schedule
time twice answers the same job and queues nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import APIRouter, Depends, Path, Query, Request, Response

from airflow_tablemgmt.api.deps import get_store, user_name
from airflow_tablemgmt.api.errors import ApiError, status_and_field
from airflow_tablemgmt.api.schemas import (
    AlterIn,
    ClusterInfoOut,
    DroppedOut,
    DynamicTableIn,
    DynamicTableOut,
    DynamicTablePage,
    DynamicTableSummaryOut,
    RefreshIn,
    RefreshJobOut,
    RefreshOut,
    ResumeIn,
)
from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.services.run_now import dag_id_for

if TYPE_CHECKING:
    from airflow_tablemgmt.core.process import Process
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.dynamic import DynamicTable

router = APIRouter(prefix="/dynamic-tables", tags=["dynamic-tables"])
StoreDep = Annotated["Store", Depends(get_store)]
TableId = Annotated[str, Path(min_length=5, max_length=800, description="catalog.namespace.table")]
REFRESH = "refresh"
_WRITE: dict[int | str, dict[str, Any]] = {400: {}, 404: {}, 409: {}, 422: {}}


def refresh_dag_id(table_id: str) -> str:
    return dag_id_for(table_id, REFRESH)


@dataclass(frozen=True)
class AirflowSide:
    """What the routes ask of Airflow: a permission check, a DAG run with conf, a pause flag, DAG state."""

    authorize: Callable[[str, str | None, bool], None]  # (method, dag_id, run permission) -> None or 403
    trigger: Callable[[str, datetime, Mapping[str, Any]], str]  # (dag_id, logical date, conf) -> run id
    pause: Callable[[str, bool], None]  # (dag_id, paused)
    dag_state: Callable[[str], tuple[bool | None, datetime | None]]  # dag_id -> (paused, next run)
    spark_master: Callable[[], str | None]


def airflow_side(request: Request, user: GetUserDep) -> AirflowSide:
    """The real Airflow side, inside the api-server (which owns Airflow's metadata DB)."""
    from airflow_tablemgmt.api import airflow_side as af

    who = user_name(user)

    def state(dag_id: str) -> tuple[bool | None, datetime | None]:
        return af.dag_states([dag_id]).get(dag_id, (None, None))

    return AirflowSide(
        authorize=lambda method, dag_id, run: af.authorize_dags(request, user, method, [dag_id], run=run),
        trigger=lambda dag_id, when, conf: af.trigger_refresh_run(dag_id, when, conf, who),
        pause=af.set_dag_paused,
        dag_state=state,
        spark_master=af.spark_master,
    )


AirflowDep = Annotated[AirflowSide, Depends(airflow_side)]


@contextmanager
def _bad_request() -> Iterator[None]:
    """FLIP-435 answers a bad refresh request with 400: the service's InvalidInput, same message."""
    try:
        yield
    except InvalidInput as e:
        raise ApiError(400, status_and_field(e)[1], str(e)) from None


def _svc() -> Any:
    from airflow_tablemgmt.services import dynamic

    return dynamic


# -- views -------------------------------------------------------------------------------------------


def _snapshots(value: Any) -> dict[str, str | None]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): (str(v) if v is not None else None) for k, v in value.items()}


def refresh_out(p: Process) -> RefreshOut:
    """A refresh process in Snowflake's history columns: the summary once it ran, else its parameters."""
    s: dict[str, Any] = dict(p.summary or {})
    params: dict[str, Any] = dict(p.parameters or {})
    reason = p.failure_reason or s.get("reason")
    return RefreshOut(
        job_id=str(p.id),
        state=p.status,
        reason=reason,
        trigger=s.get("trigger") or params.get("trigger"),
        refresh_action=s.get("refresh_action"),
        schedule_time=s.get("schedule_time") or params.get("schedule_time") or p.instant.isoformat(),
        source_snapshots=_snapshots(s.get("source_snapshots")),
        partitions_written=list(s.get("partitions_written") or []),
        rows_written=s.get("rows_written"),
        duration_seconds=s.get("duration_seconds"),
        application_id=s.get("application_id") or p.external_id,
        attempt=p.attempt,
        dag_run_id=p.run_id,
        started_at=p.started_at,
        finished_at=p.finished_at,
    )


def _cron(dt: DynamicTable) -> str | None:
    freshness = dt.definition.freshness
    return freshness.to_cron() if hasattr(freshness, "to_cron") else None


def _last_refresh(store: Store, table_id: str) -> RefreshOut | None:
    last = store.processes.list(table_id=table_id, action=REFRESH, limit=1)
    return refresh_out(last[0]) if last else None


def summary_out(store: Store, dt: DynamicTable) -> DynamicTableSummaryOut:
    return DynamicTableSummaryOut(
        table=dt.id,
        state=str(dt.state),
        freshness=str(dt.definition.freshness),
        cron=_cron(dt),
        managed_by=str(dt.managed_by),
        last_refresh=_last_refresh(store, dt.id),
    )


def table_out(
    store: Store, dt: DynamicTable, airflow: AirflowSide, outcome: str | None = None
) -> DynamicTableOut:
    dag_id = refresh_dag_id(dt.id)
    paused, next_run = airflow.dag_state(dag_id)
    return DynamicTableOut(
        **summary_out(store, dt).model_dump(),
        definition=dt.definition.model_dump(mode="json", by_alias=True, exclude_none=True),
        dag_id=dag_id,
        paused=paused,
        next_run=next_run,
        consecutive_failures=dt.consecutive_failures,
        suspend_after_failures=int(getattr(dt.definition, "suspend_after_failures", 5)),
        suspended_reason=dt.suspended_reason,
        dynamic_options=dict(dt.dynamic_options),
        outcome=outcome,  # type: ignore[arg-type]
    )


# -- routes ------------------------------------------------------------------------------------------


@router.get("", response_model=DynamicTablePage)
def list_dynamic_tables(
    store: StoreDep,
    state: Annotated[str | None, Query(max_length=20, description="CREATING, ACTIVE or SUSPENDED")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> DynamicTablePage:
    """Dynamic tables by id, with state, freshness, cron and last refresh."""
    tables = list(_svc().list_(store))
    if state is not None:
        allowed = ("CREATING", "ACTIVE", "SUSPENDED")
        if state.upper() not in allowed:
            raise ApiError(422, "state", f"state: {state!r} is not a state; allowed: {', '.join(allowed)}")
        tables = [t for t in tables if str(t.state) == state.upper()]
    page = tables[offset : offset + limit]
    return DynamicTablePage(
        items=[summary_out(store, t) for t in page], total=len(tables), limit=limit, offset=offset
    )


@router.post("", response_model=DynamicTableOut, status_code=201, responses=_WRITE)
def create(
    body: DynamicTableIn, request: Request, user: GetUserDep, store: StoreDep, airflow: AirflowDep
) -> DynamicTableOut:
    """Declare a dynamic table: Spark analyses the query, creates the Iceberg table (schema and partition
    spec from the query) and runs the first refresh (trigger CREATION) before this answers; a failure
    leaves nothing behind. Needs edit permission on the table's refresh DAG."""
    definition = body.definition()
    airflow.authorize("PUT", refresh_dag_id(_declared_id(definition)), False)
    dt, _process = _svc().create(store, definition, _runner())
    return table_out(store, dt, airflow, "created")


@router.get("/{table_id}", response_model=DynamicTableOut, responses={404: {}})
def get_one(table_id: TableId, store: StoreDep, airflow: AirflowDep) -> DynamicTableOut:
    """Definition, state, freshness, cron, the refresh DAG's state and the last refresh."""
    return table_out(store, _svc().get(store, table_id), airflow)


@router.get("/{table_id}/history", response_model=list[RefreshOut], responses={404: {}})
def history(
    table_id: TableId, store: StoreDep, limit: Annotated[int, Query(ge=1, le=1000)] = 50
) -> list[RefreshOut]:
    """Refreshes, newest schedule time first (Snowflake's refresh-history columns)."""
    return [refresh_out(p) for p in _svc().history(store, table_id, limit)]


@router.post("/{table_id}/refresh", response_model=RefreshJobOut, responses=_WRITE)
def refresh(
    table_id: TableId, body: RefreshIn, store: StoreDep, airflow: AirflowDep, response: Response
) -> RefreshJobOut:
    """FLIP-435's refresh: submit a refresh of the table for ``scheduleTime`` and answer its job.
    Needs permission to trigger the table's refresh DAG."""
    svc = _svc()
    svc.get(store, table_id)  # 404 before the permission check, as run-now does
    dag_id = refresh_dag_id(table_id)
    airflow.authorize("POST", dag_id, True)
    with _bad_request():
        done = svc.refresh(
            store,
            table_id,
            is_periodic=body.isPeriodic,
            schedule_time=body.scheduleTime,
            static_partitions=dict(body.staticPartitions),
            dynamic_options=dict(body.dynamicOptions),
            trigger=airflow.trigger,
        )
    info: Mapping[str, Any] = getattr(done, "cluster_info", None) or {}
    return RefreshJobOut(
        jobId=str(done.process.id),
        dagRunId=done.run_id,
        clusterInfo=ClusterInfoOut(
            master=info.get("master") or airflow.spark_master(),
            applicationId=info.get("applicationId") or info.get("application_id") or done.process.external_id,
        ),
    )


@router.post("/{table_id}/suspend", response_model=DynamicTableOut, responses={404: {}, 409: {}})
def suspend(table_id: TableId, store: StoreDep, airflow: AirflowDep) -> DynamicTableOut:
    """Pause the refresh DAG and mark the table SUSPENDED; suspending a suspended table is a 409."""
    _svc().get(store, table_id)
    airflow.authorize("PUT", refresh_dag_id(table_id), False)
    dt = _svc().suspend(store, table_id, airflow.pause)
    return table_out(store, dt, airflow, "suspended")


@router.post("/{table_id}/resume", response_model=DynamicTableOut, responses={404: {}, 409: {}})
def resume(
    table_id: TableId, store: StoreDep, airflow: AirflowDep, body: ResumeIn | None = None
) -> DynamicTableOut:
    """Unpause the refresh DAG, clear the failure count; ``dynamic_options`` apply to later refreshes."""
    _svc().get(store, table_id)
    airflow.authorize("PUT", refresh_dag_id(table_id), False)
    options = body.dynamic_options if body is not None else None
    dt = _svc().resume(store, table_id, airflow.pause, dynamic_options=options)
    return table_out(store, dt, airflow, "resumed")


@router.patch("/{table_id}", response_model=DynamicTableOut, responses=_WRITE)
def alter(table_id: TableId, body: AlterIn, store: StoreDep, airflow: AirflowDep) -> DynamicTableOut:
    """Change the freshness (the DAG is rescheduled) or the query (the next refresh uses it; a different
    schema is an error unless ``recreate``)."""
    _svc().get(store, table_id)
    airflow.authorize("PUT", refresh_dag_id(table_id), False)
    if body.freshness is None and body.query is None:
        raise ApiError(422, "body", "body: give freshness, query or both; nothing to alter")
    dt = _svc().alter(
        store, table_id, freshness=body.freshness, query=body.query, recreate=body.recreate, runner=_runner()
    )
    return table_out(store, dt, airflow, "altered")


@router.delete("/{table_id}", response_model=DroppedOut, responses={404: {}, 409: {}})
def drop(
    table_id: TableId,
    store: StoreDep,
    airflow: AirflowDep,
    purge: Annotated[bool, Query(description="also drop the Iceberg table and its data")] = False,
) -> DroppedOut:
    """Drop the dynamic table's workflow (its DAG is paused, its history stays); the Iceberg table only
    with ``purge=true``."""
    _svc().get(store, table_id)
    airflow.authorize("DELETE", refresh_dag_id(table_id), False)
    _svc().drop(store, table_id, purge=purge, runner=_runner() if purge else None, pauser=airflow.pause)
    return DroppedOut(table=table_id, dropped=True, purged=purge)


# -- helpers -----------------------------------------------------------------------------------------


def _declared_id(definition: Mapping[str, Any]) -> str | None:
    """The id a create body names, for the permission check (the service validates it)."""
    ident = definition.get("identifier")
    if isinstance(ident, str) and ident:
        return ident
    parts = [definition.get(k) for k in ("catalog", "namespace", "name")]
    return ".".join(parts) if all(isinstance(p, str) and p for p in parts) else None  # type: ignore[arg-type]


def _runner() -> Any:
    """The Spark runner for create / alter / purge: the services' default job path (spark_default)."""
    return _svc().default_runner()
