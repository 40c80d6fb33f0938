"""``/dynamic-tables``: create, list, get, history, suspend, resume, alter, drop, and FLIP-435's refresh.

Every route is a thin call into ``services.dynamic`` (which the CLI's ``tablemgmt dt`` calls too, so
both answer a bad value with the same message). What only Airflow can do — trigger the refresh DAG,
pause it, check DAG permissions — comes in through :class:`AirflowSide`, a dependency, so the routes
run the same against Airflow's api-server and against a stand-in in unit tests.

``POST /dynamic-tables/{id}/refresh`` is FLIP-435's REST refresh: body ``{"isPeriodic",
"scheduleTime": "yyyy-MM-dd HH:mm:ss", "staticPartitions", "dynamicOptions"}``, answer ``{"jobId",
"dagRunId", "clusterInfo": {"master", "applicationId"}}`` once the refresh is submitted (its process
exists, its DAG run is queued). A bad request is a 400 with the service's message (Flink's, where
Flink has one: "Schedule time must be specified for periodic refresh."); ``scheduleTime`` must lie
within [the refresh DAG's start, now + 5 minutes] and carry a zone unless in FLIP-435's own format
(UTC); the same periodic schedule time twice answers the same job and queues nothing. ``DELETE …?purge=true``
is refused (dropping the Iceberg table runs Spark): ``tablemgmt dt drop --purge`` on a worker host.
(Just over 400 lines since the refresh mode joined PATCH and the answers; FLIP-435's refresh route and its
schedule-time checks move to a module of their own next.)
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from airflow_tablemgmt.api.deps import get_store, user_name
from airflow_tablemgmt.api.dynamic_schemas import (
    AlterIn,
    ClusterInfoOut,
    DroppedOut,
    DynamicTableCreatedOut,
    DynamicTableIn,
    DynamicTableOut,
    DynamicTablePage,
    DynamicTableSummaryOut,
    RefreshIn,
    RefreshJobOut,
    RefreshModeOut,
    RefreshOut,
    ResumeIn,
)
from airflow_tablemgmt.api.errors import ApiError, status_and_field
from airflow_tablemgmt.api.user_sql import require_user_sql_author
from airflow_tablemgmt.core.actions import REFRESH as REFRESH_ACTION
from airflow_tablemgmt.core.text import TEXT_PATTERN
from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.services.run_now import dag_id_for

if TYPE_CHECKING:
    from airflow_tablemgmt.core.process import Process
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.dynamic import DynamicTable

router = APIRouter(prefix="/dynamic-tables", tags=["dynamic-tables"])
StoreDep = Annotated["Store", Depends(get_store)]
TableId = Annotated[
    str, Path(pattern=TEXT_PATTERN, min_length=5, max_length=800, description="catalog.namespace.table")
]


def refresh_dag_id(table_id: str) -> str:
    return dag_id_for(table_id, REFRESH_ACTION.name)


@dataclass(frozen=True)
class AirflowSide:
    """What the routes ask of Airflow: permission checks, a DAG run with conf, a pause flag, DAG state."""

    authorize: Callable[[str, str | None, bool], None]  # (method, dag_id, run permission) -> None or 403
    # (what the request does) -> None, or a 403 naming [tablemgmt] user_sql_authors (api/user_sql.py)
    authorize_user_sql: Callable[[str], None]
    trigger: Callable[[str, datetime, Mapping[str, Any]], str]  # (dag_id, logical date, conf) -> run id
    pause: Callable[[str, bool], None]  # (dag_id, paused)
    dag_state: Callable[[str], tuple[bool | None, datetime | None]]  # dag_id -> (paused, next run)
    spark_master: Callable[[], str | None]
    find_run: Callable[[str, datetime], str | None]  # (dag_id, logical date) -> the run there, if any


def airflow_side(request: Request, user: GetUserDep) -> AirflowSide:
    """The real Airflow side, inside the api-server (which owns Airflow's metadata DB)."""
    from airflow_tablemgmt.api import airflow_side as af

    who = user_name(user)

    def state(dag_id: str) -> tuple[bool | None, datetime | None]:
        return af.dag_states([dag_id]).get(dag_id, (None, None))

    return AirflowSide(
        authorize=lambda method, dag_id, run: af.authorize_dags(request, user, method, [dag_id], run=run),
        authorize_user_sql=lambda what: require_user_sql_author(user, what),
        trigger=lambda dag_id, when, conf: af.trigger_refresh_run(dag_id, when, conf, who),
        pause=af.set_dag_paused,
        dag_state=state,
        spark_master=af.spark_master,
        find_run=af.existing_run_id,
    )


AirflowDep = Annotated[AirflowSide, Depends(airflow_side)]


@contextmanager
def _bad_request() -> Iterator[None]:
    """FLIP-435 answers a bad refresh request with 400: the service's InvalidInput, same message."""
    from airflow_tablemgmt.services.dynamic import PERIODIC_NEEDS_SCHEDULE_TIME

    try:
        yield
    except InvalidInput as e:
        field = "scheduleTime" if str(e) == PERIODIC_NEEDS_SCHEDULE_TIME else status_and_field(e)[1]
        raise ApiError(400, field, str(e)) from None


def _svc() -> Any:
    from airflow_tablemgmt.services import dynamic

    return dynamic


# -- views -------------------------------------------------------------------------------------------


def refresh_out(p: Process) -> RefreshOut:
    """A refresh process in Snowflake's history columns: the service's own row (the CLI prints it too),
    snapshot ids as strings (they exceed 2^53), plus the DAG run."""
    row = _svc().history_row(p)
    snapshots = row.get("source_snapshots") or {}
    row["source_snapshots"] = {str(k): (str(v) if v is not None else None) for k, v in snapshots.items()}
    return RefreshOut(**row, dag_run_id=p.run_id)


def summary_out(view: Any) -> DynamicTableSummaryOut:
    """``view``: the service's ``DynamicTableView``."""
    dt: DynamicTable = view.table
    return DynamicTableSummaryOut(
        table=dt.id,
        state=str(dt.state),
        freshness=view.freshness,
        cron=view.cron,
        managed_by=str(dt.managed_by),
        refresh_mode=RefreshModeOut(**view.refresh_mode),
        last_refresh=refresh_out(view.last_refresh) if view.last_refresh is not None else None,
    )


def table_out(
    store: Store, table_id: str, airflow: AirflowSide, outcome: str | None = None
) -> DynamicTableOut:
    view = _svc().get(store, table_id)
    dt: DynamicTable = view.table
    paused, next_run = airflow.dag_state(view.dag_id)
    return DynamicTableOut(
        **summary_out(view).model_dump(),
        definition=dt.definition.model_dump(mode="json", by_alias=True, exclude_none=True),
        dag_id=view.dag_id,
        paused=paused,
        next_run=next_run,
        consecutive_failures=dt.consecutive_failures,
        suspend_after_failures=int(dt.definition.suspend_after_failures),
        suspended_reason=dt.suspended_reason,
        dynamic_options=dict(dt.dynamic_options),
        outcome=outcome,  # type: ignore[arg-type]
    )


# -- routes ------------------------------------------------------------------------------------------


@router.get("", response_model=DynamicTablePage)
def list_dynamic_tables(
    store: StoreDep,
    state: Annotated[
        str | None, Query(pattern=TEXT_PATTERN, max_length=20, description="CREATING, ACTIVE or SUSPENDED")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> DynamicTablePage:
    """Dynamic tables by id, with state, freshness, cron and last refresh."""
    views = list(_svc().list_(store))
    if state is not None:
        allowed = ("CREATING", "ACTIVE", "SUSPENDED")
        if state.upper() not in allowed:
            raise ApiError(422, "state", f"state: {state!r} is not a state; allowed: {', '.join(allowed)}")
        views = [v for v in views if str(v.table.state) == state.upper()]
    return DynamicTablePage(
        items=[summary_out(v) for v in views[offset : offset + limit]],
        total=len(views),
        limit=limit,
        offset=offset,
    )


@router.post("", response_model=DynamicTableCreatedOut, status_code=202)
def create(body: DynamicTableIn, store: StoreDep, airflow: AirflowDep) -> DynamicTableCreatedOut:
    """Declare a dynamic table: the definition is validated and stored (state CREATING) and its creation
    is queued; Spark analyses the query, creates the Iceberg table and runs the first refresh (trigger
    CREATION) in the refresh DAG's task on a worker, never in the api-server. Follow ``process_id``
    (GET /processes/{id}) or GET /dynamic-tables/{id}. Needs edit permission on the refresh DAG and a
    match of ``[tablemgmt] user_sql_authors`` (the query is user SQL; 403 naming it otherwise)."""
    definition = body.definition()
    table_id = _svc().parse_definition(definition).id
    dag_id = refresh_dag_id(table_id)
    airflow.authorize("PUT", dag_id, False)
    airflow.authorize_user_sql(f"creating dynamic table {table_id}")
    dt = _svc().declare(store, definition)
    queued = None
    known = False
    try:
        paused = airflow.dag_state(dag_id)[0]
        known = paused is not None
        if known:  # Airflow knows the DAG (a table created again after a drop): run it now
            if paused:
                airflow.pause(dag_id, False)
            queued = _svc().queue_creation(store, dt.id, airflow.trigger)
        out = table_out(store, dt.id, airflow, "created")
    except Exception:
        if queued is None:  # nothing queued: leave no registration (so no DAG) and no unpaused DAG
            _svc().abandon(store, dt.id, airflow.pause if known else None)
        raise
    return DynamicTableCreatedOut(
        **out.model_dump(),
        creation="triggered" if queued is not None else "waiting for the DAG",
        process_id=queued.process.id if queued is not None else None,
        dag_run_id=queued.run_id if queued is not None else None,
    )


@router.get("/{table_id}", response_model=DynamicTableOut)
def get_one(table_id: TableId, store: StoreDep, airflow: AirflowDep) -> DynamicTableOut:
    """Definition, state, freshness, cron, the refresh DAG's state and the last refresh."""
    return table_out(store, table_id, airflow)


@router.get("/{table_id}/history", response_model=list[RefreshOut])
def history(
    table_id: TableId, store: StoreDep, limit: Annotated[int, Query(ge=1, le=1000)] = 50
) -> list[RefreshOut]:
    """Refreshes, newest schedule time first (Snowflake's refresh-history columns); history outlives a drop."""
    return [refresh_out(p) for p in _svc().history(store, table_id, limit)]


class _Flip435Route(APIRoute):
    """A ``scheduleTime`` that is no string (a number such as ``-1615``, read elsewhere as 1969, or a
    boolean) is a bad refresh request like any other bad schedule time: 400 naming the field, as the
    service answers for a time outside the window. Other body errors keep the API's 422."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as e:
                errors = e.errors()
                if not errors or any(
                    tuple(err.get("loc", ()))[:2] != ("body", "scheduleTime") for err in errors
                ):
                    raise
                raise ApiError(
                    400,
                    "scheduleTime",
                    f"scheduleTime: {errors[0].get('input')!r} is not a time; allowed: 'yyyy-MM-dd HH:mm:ss' "
                    "(UTC) or an ISO 8601 time with a time zone, from the refresh DAG's start to now + 5 minutes",
                ) from None

        return route


def refresh(table_id: TableId, body: RefreshIn, store: StoreDep, airflow: AirflowDep) -> RefreshJobOut:
    """FLIP-435's refresh: submit a refresh of the table for ``scheduleTime`` and answer its job.
    Needs permission to trigger the table's refresh DAG; with ``dynamicOptions`` (Spark session settings
    for this refresh) also a match of ``[tablemgmt] user_sql_authors``."""
    svc = _svc()
    view = svc.get(store, table_id)  # 404 before the permission check, as run-now does
    dag_id = refresh_dag_id(table_id)
    airflow.authorize("POST", dag_id, True)
    if body.dynamicOptions:
        airflow.authorize_user_sql(f"refreshing dynamic table {table_id} with dynamicOptions")
    # Checked before the service opens the refresh's process, so an early request leaves no failed job
    # behind for its schedule time: a suspended table's DAG is paused (its run would wait for resume),
    # and a DAG Airflow has not parsed yet cannot take a run.
    svc.check_not_suspended(view.table)
    if airflow.dag_state(dag_id)[0] is None:
        raise ApiError(
            404,
            "table_id",
            f"table_id: Airflow has no DAG {dag_id} yet; the dag processor parses a new dynamic table's "
            "DAG within [dag_processor] refresh_interval, try again then",
        )
    with _bad_request():
        done = svc.refresh(
            store,
            table_id,
            is_periodic=body.isPeriodic,
            schedule_time=body.scheduleTime,
            static_partitions=body.staticPartitions,
            dynamic_options=body.dynamicOptions,
            trigger=airflow.trigger,
        )
    # A reused process may predate its run id in the store: the run is Airflow's at that instant.
    run_id = done.run_id or done.process.run_id or airflow.find_run(dag_id, done.process.instant)
    return RefreshJobOut(
        jobId=done.process.id,
        dagRunId=run_id,
        clusterInfo=ClusterInfoOut(master=airflow.spark_master(), applicationId=done.process.external_id),
    )


router.add_api_route(
    "/{table_id}/refresh",
    refresh,
    methods=["POST"],
    response_model=RefreshJobOut,
    route_class_override=_Flip435Route,
)


@router.post("/{table_id}/suspend", response_model=DynamicTableOut)
def suspend(table_id: TableId, store: StoreDep, airflow: AirflowDep) -> DynamicTableOut:
    """Pause the refresh DAG and mark the table SUSPENDED; suspending a suspended table is a 409."""
    _svc().get(store, table_id)
    airflow.authorize("PUT", refresh_dag_id(table_id), False)
    _svc().suspend(store, table_id, airflow.pause)
    return table_out(store, table_id, airflow, "suspended")


@router.post("/{table_id}/resume", response_model=DynamicTableOut)
def resume(
    table_id: TableId, store: StoreDep, airflow: AirflowDep, body: ResumeIn | None = None
) -> DynamicTableOut:
    """Unpause the refresh DAG and clear the failure count; ``dynamic_options`` apply to later
    refreshes (and need a match of ``[tablemgmt] user_sql_authors``). Resuming a table that is not
    suspended is a 409."""
    _svc().get(store, table_id)
    airflow.authorize("PUT", refresh_dag_id(table_id), False)
    options = body.dynamic_options if body is not None else None
    if options:
        airflow.authorize_user_sql(f"resuming dynamic table {table_id} with dynamic_options")
    _svc().resume(store, table_id, airflow.pause, dynamic_options=options)
    return table_out(store, table_id, airflow, "resumed")


@router.patch("/{table_id}", response_model=DynamicTableOut)
def alter(table_id: TableId, body: AlterIn, store: StoreDep, airflow: AirflowDep) -> DynamicTableOut:
    """Change the freshness (the DAG is rescheduled), the timeout (one refresh's limit, checked as at
    create) and/or the refresh mode (INCREMENTAL checked against the analysis the last refresh recorded:
    no Spark here). A new query is a 422: the api-server never runs
    Spark on user SQL (``tablemgmt dt alter --query`` on a worker host does). A table declared in
    tables.yaml answers 409. Needs a match of ``[tablemgmt] user_sql_authors``: an alter changes how
    often (and for how long) user SQL runs."""
    _svc().get(store, table_id)
    airflow.authorize("PUT", refresh_dag_id(table_id), False)
    airflow.authorize_user_sql(f"altering dynamic table {table_id}")
    if body.freshness is None and body.query is None and body.timeout is None and body.refresh_mode is None:
        raise ApiError(422, "body", "body: give freshness, timeout and/or refresh_mode; nothing to alter")
    if body.query is not None:  # Spark would analyse it here, in the api-server: user SQL runs on workers
        raise ApiError(
            422,
            "query",
            "query: the REST API does not change a dynamic table's query (Spark analyses a query only where "
            "refreshes run, never in the api-server); drop the table and POST it again with the new query, "
            "or run `tablemgmt dt alter --query` on a worker host",
        )
    _svc().alter(
        store, table_id, freshness=body.freshness, timeout=body.timeout, refresh_mode=body.refresh_mode
    )
    return table_out(store, table_id, airflow, "altered")


@router.delete("/{table_id}", response_model=DroppedOut)
def drop(
    table_id: TableId,
    store: StoreDep,
    airflow: AirflowDep,
    purge: Annotated[
        bool,
        Query(
            description="refused (422): dropping the Iceberg table runs Spark; use `tablemgmt dt drop --purge`"
        ),
    ] = False,
) -> DroppedOut:
    """Remove the workflow (the refresh DAG is paused, the registration removed; history stays). A table
    declared in tables.yaml answers 409. ``purge=true`` is a 422 that changes nothing: dropping the
    Iceberg table runs Spark, which never runs in the api-server; ``tablemgmt dt drop --purge`` on a
    worker host removes the workflow and the table together."""
    _svc().get(store, table_id)
    airflow.authorize("DELETE", refresh_dag_id(table_id), False)
    if purge:
        raise ApiError(
            422,
            "purge",
            "purge: the REST API does not drop a dynamic table's Iceberg table (that runs Spark, which never "
            f"runs in the api-server); run `tablemgmt dt drop {table_id} --purge` on a worker host instead: it "
            "removes the workflow and the table together. DELETE without purge removes only the workflow",
        )
    _svc().drop(store, table_id, purge=False, pauser=airflow.pause)
    return DroppedOut(table=table_id, dropped=True, purged=False)
