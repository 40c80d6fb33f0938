"""``/cost``: what maintenance cost, rolled up per table, policy, day, action or status
(``services/cost.py``; ``tablemgmt cost`` is the same service)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from airflow_tablemgmt.api.deps import get_store
from airflow_tablemgmt.api.errors import ApiError
from airflow_tablemgmt.core.text import TEXT_PATTERN
from airflow_tablemgmt.services.cost import MAX_DAYS, MAX_GROUPS, cost_rollup, parse_by
from airflow_tablemgmt.services.errors import InvalidInput

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

router = APIRouter(tags=["processes"])
StoreDep = Annotated["Store", Depends(get_store)]


class CostGroupOut(BaseModel):
    """One group: the values of the dimensions asked for, and what its processes cost."""

    day: str | None = Field(None, description="UTC day (YYYY-MM-DD), when grouped by day")
    policy: str | None = Field(
        None, description="the policy managing the table (null: declared on its own), when grouped by policy"
    )
    table: str | None = Field(None, description="catalog.namespace.table, when grouped by table")
    action: str | None = None
    status: str | None = None
    n: int = Field(description="finished processes")
    measured: int = Field(description="of which Spark's metrics measured the cost")
    core_seconds: float = Field(description="executor core-seconds: task run time summed")
    cpu_seconds: float = Field(description="executor CPU seconds of the same tasks")
    bytes_read: int = Field(description="bytes the tasks read from storage")
    bytes_written: int = Field(description="bytes the tasks wrote to storage")
    files_removed: int
    bytes_removed: int


class CostOut(BaseModel):
    by: list[str]
    days: int
    items: list[CostGroupOut]


@router.get("/cost", response_model=CostOut)
def get_cost(
    store: StoreDep,
    by: Annotated[
        str,
        Query(
            pattern=r"^[a-z,]{1,60}$",
            description="any of day, policy, table, action, status, comma-separated (default table)",
        ),
    ] = "table",
    days: Annotated[int, Query(ge=1, le=MAX_DAYS, description="the last N UTC days, today included")] = 30,
    table: Annotated[str | None, Query(pattern=TEXT_PATTERN, min_length=1, max_length=800)] = None,
    policy: Annotated[str | None, Query(pattern=TEXT_PATTERN, min_length=1, max_length=100)] = None,
    action: Annotated[str | None, Query(pattern=TEXT_PATTERN, min_length=1, max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_GROUPS)] = 1000,
) -> CostOut:
    """Executor core-seconds, CPU seconds, bytes read and written, files and bytes removed by the processes
    that finished in the last ``days`` UTC days, grouped by ``by``: newest day first, then the most
    core-seconds."""
    try:
        dims = parse_by(by, "by")
    except InvalidInput as e:
        raise ApiError(422, "by", str(e)) from None
    rows = cost_rollup(store, dims, days=days, table=table, policy=policy, action=action, limit=limit)
    return CostOut(by=dims, days=days, items=[CostGroupOut(**r.to_dict()) for r in rows])
