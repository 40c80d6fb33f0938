"""``/tables``: list, get, register, update, remove; a table's actions, health and run-now."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import APIRouter, Depends, Path, Query, Request, Response

from airflow_tablemgmt.api.airflow_side import authorize_dags, trigger_run
from airflow_tablemgmt.api.deps import get_store, user_name
from airflow_tablemgmt.api.schemas import (
    ActionOut,
    HealthOut,
    RemovedOut,
    RunIn,
    RunOut,
    TableChange,
    TableIn,
    TableOut,
    TablePage,
)
from airflow_tablemgmt.api.views import actions_of, summary_out, table_out
from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.errors import TableNotFound
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.text import TEXT_PATTERN
from airflow_tablemgmt.services import RegisterRequest, register_table, remove_table
from airflow_tablemgmt.services.health import table_health
from airflow_tablemgmt.services.run_now import dag_id_for, request_run
from airflow_tablemgmt.services.tables import table_metadata
from airflow_tablemgmt.store.effective import effective_table

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

router = APIRouter(prefix="/tables", tags=["tables"])
StoreDep = Annotated["Store", Depends(get_store)]
TableId = Annotated[
    str, Path(pattern=TEXT_PATTERN, min_length=5, max_length=800, description="catalog.namespace.table")
]
# An enum in the OpenAPI document: the actions this version knows.
if TYPE_CHECKING:
    ActionName = str
else:
    ActionName = Annotated[Literal[tuple(ACTIONS.names())], Path(description="a maintenance action")]


def _enabled(store: Store, table_id: str) -> list[str]:
    try:
        return effective_table(store, table_id).enabled_actions()
    except TableNotFound:
        return []


def _affected_dags(store: Store, table_id: str, body: TableChange) -> list[str | None]:
    """The DAGs a change touches: the table's enabled actions now and those the body names."""
    actions = set(_enabled(store, table_id)) | set(body.actions or {})
    return [dag_id_for(table_id, a) for a in actions] or [None]


def _request(body: TableChange, table: str | None, spec: Mapping[str, Any] | None) -> RegisterRequest:
    return RegisterRequest(
        table=table,
        spec={**(spec or {}), **({"actions": body.actions} if body.actions is not None else {})},
        format=body.format,
        owner=body.owner,
        queue=body.queue,
        priority=body.priority,
        replace_actions=body.replace_actions,
        catalog_type=getattr(body, "catalog_type", None),
        warehouse=getattr(body, "warehouse", None),
        source="body",
    )


@router.get("", response_model=TablePage)
def get_tables(
    store: StoreDep,
    q: Annotated[
        str | None, Query(pattern=TEXT_PATTERN, max_length=250, description="part of the table id or owner")
    ] = None,
    catalog: Annotated[str | None, Query(pattern=TEXT_PATTERN, max_length=250)] = None,
    namespace: Annotated[str | None, Query(pattern=TEXT_PATTERN, max_length=250)] = None,
    action: Annotated[
        str | None, Query(pattern=TEXT_PATTERN, max_length=100, description="tables with this action enabled")
    ] = None,
    status: Annotated[
        ProcessStatus | None, Query(description="tables whose newest process of some action has this status")
    ] = None,
    needs_attention: Annotated[
        bool, Query(description="only tables whose cached health has a finding (an action would help)")
    ] = False,
    sort: Annotated[
        Literal["table", "owner", "catalog", "updated", "health"],
        Query(description="health: by the cached health score, worst first (unmeasured last)"),
    ] = "table",
    desc: bool = False,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> TablePage:
    """One page of tables with what each row shows (badges per action, cached health score):
    search, filters, sort and paging run in the store's SQL, so the page makes no request per row."""
    from airflow_tablemgmt.services.overview import list_page
    from airflow_tablemgmt.store.listing import TableFilter

    found = list_page(
        store,
        TableFilter(q=q, catalog=catalog, namespace=namespace, action=action, status=status and str(status)),
        sort=sort,
        desc=desc,
        needs_attention=needs_attention,
        limit=limit,
        offset=offset,
    )
    return TablePage(
        items=[summary_out(r) for r in found.items],
        total=found.total,
        limit=limit,
        offset=offset,
        measuring=found.measuring,
        measured=found.measured,
    )


@router.get("/{table_id}", response_model=TableOut)
def get_table(table_id: TableId, store: StoreDep) -> TableOut:
    return table_out(store, store.tables.get_registered(table_id))


@router.post(
    "",
    response_model=TableOut,
    status_code=201,
    responses={
        200: {"model": TableOut, "description": "the table was registered already: the fields given changed"}
    },
)
def register(
    body: TableIn, request: Request, response: Response, user: GetUserDep, store: StoreDep
) -> TableOut:
    """Register a table, or update it with only the fields given (as `tablemgmt register`).
    201 when created, 200 when it existed. A table declared in tables.yaml answers 409."""
    table_id = f"{body.catalog}.{body.namespace}.{body.name}"
    authorize_dags(request, user, "PUT", _affected_dags(store, table_id, body))
    spec = {"catalog": body.catalog, "namespace": body.namespace, "name": body.name}
    result = register_table(store, _request(body, None, spec))
    if result.outcome != "created":
        response.status_code = 200
    return table_out(
        store,
        store.tables.get_registered(result.table_id),
        outcome=result.outcome,
        removed_actions=result.removed_actions,
        catalog_created=result.catalog_created,
        warnings=result.warnings,
    )


@router.patch("/{table_id}", response_model=TableOut)
def update(
    table_id: TableId, body: TableChange, request: Request, user: GetUserDep, store: StoreDep
) -> TableOut:
    """Change a registered table: only the fields given change."""
    store.tables.get_registered(table_id)  # 404 before anything else: PATCH never creates
    authorize_dags(request, user, "PUT", _affected_dags(store, table_id, body))
    result = register_table(store, _request(body, table_id, None))
    return table_out(
        store,
        store.tables.get_registered(result.table_id),
        outcome=result.outcome,
        removed_actions=result.removed_actions,
    )


@router.delete("/{table_id}", response_model=RemovedOut)
def remove(table_id: TableId, request: Request, user: GetUserDep, store: StoreDep) -> RemovedOut:
    """Unregister a store-owned table (its process history stays)."""
    store.tables.get_registered(table_id)
    authorize_dags(
        request, user, "DELETE", [dag_id_for(table_id, a) for a in _enabled(store, table_id)] or [None]
    )
    remove_table(store, table_id)
    return RemovedOut(table=table_id, removed=True)


@router.get("/{table_id}/actions", response_model=list[ActionOut])
def get_actions(table_id: TableId, store: StoreDep) -> list[ActionOut]:
    """Enabled actions with their schedule (trigger, interval, next run) and newest process."""
    return actions_of(store, store.tables.get_registered(table_id))


@router.get("/{table_id}/health", response_model=HealthOut)
def get_health(table_id: TableId, store: StoreDep) -> HealthOut:
    """The table's health read from its format's metadata (cached for 60 s) and the last success/failure per
    action."""
    h = table_health(store, table_id).to_dict()
    if h["files"] is not None:
        sid = h["files"]["snapshot_id"]
        h["files"]["snapshot_id"] = str(sid) if sid is not None else None
    return HealthOut(**h)


@router.get("/{table_id}/details", response_model=dict[str, Any])
def get_details(table_id: TableId, store: StoreDep) -> dict[str, Any]:
    """The Details tab: schema (nested columns dotted), partition spec, sort order, properties, location,
    the format's own figures, owner and catalog, read by the view the table's format declared
    (``Format.views`` of its descriptor, no JVM); a format without one is a 422 naming the formats that have it."""
    return table_metadata(store, table_id, "details")


@router.get("/{table_id}/files", response_model=dict[str, Any])
def get_files(table_id: TableId, store: StoreDep) -> dict[str, Any]:
    """The Files tab: per partition (the most files first, at most 500) the live data and delete files,
    bytes, records, small files and a histogram of data file sizes against the table's target size; a
    format may list the files themselves (``files``). Read by the format's declared view."""
    return table_metadata(store, table_id, "files")


@router.get("/{table_id}/snapshots", response_model=dict[str, Any])
def get_snapshots(table_id: TableId, store: StoreDep) -> dict[str, Any]:
    """The Snapshots tab: every snapshot (a format's log version or instant: ``entry_label``) oldest first,
    its operation and the data/delete files, records and bytes it added and removed where the format
    records them (null otherwise). Read by the format's declared view."""
    return table_metadata(store, table_id, "snapshots")


@router.post("/{table_id}/actions/{action}/runs", response_model=RunOut, status_code=201)
def run_now(
    table_id: TableId,
    action: ActionName,
    request: Request,
    user: GetUserDep,
    store: StoreDep,
    body: RunIn | None = None,
) -> RunOut:
    """Trigger the action's DAG at ``instant`` (its logical date) and open its process, PENDING.
    ``instant``: ISO 8601 with a time zone, between the DAG's start date and now + 5 minutes (a number,
    a naive time or one outside that window is a 422 naming it). The same instant twice answers 409
    and starts nothing."""
    from airflow_tablemgmt.services.run_now import check_runnable

    dag_id = check_runnable(store, table_id, action)
    authorize_dags(request, user, "POST", [dag_id], run=True)
    instant = body.instant if body is not None and body.instant is not None else datetime.now(UTC)
    who = user_name(user)
    done = request_run(
        store, table_id, action, instant, lambda d, when, conf=None: trigger_run(d, when, who, conf)
    )
    return RunOut(
        process_id=done.process.id,
        status=done.process.status,
        instant=done.process.instant,
        dag_id=done.dag_id,
        run_id=done.run_id,
    )
