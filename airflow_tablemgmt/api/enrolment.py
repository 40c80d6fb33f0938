"""``/discovery``: run a discovery pass now (``POST``) and read what passes changed (``GET /discovery/enrolments``),
thin over ``services/enrolment.py``.

A pass lists the policies' catalogs in the API server's process, without a JVM, and changes the tables those
policies manage, so running it needs permission on every DAG (as changing a catalog does); a dry run too,
since it reads every catalog the policies name.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from airflow_tablemgmt.api.airflow_side import authorize_dags
from airflow_tablemgmt.api.deps import get_store
from airflow_tablemgmt.core.text import TEXT_PATTERN

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

router = APIRouter(prefix="/discovery", tags=["discovery"])
StoreDep = Annotated["Store", Depends(get_store)]


class DiscoveryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: str | None = Field(
        default=None,
        max_length=63,
        description="one policy's catalogs and tables only (default: every policy)",
    )
    dry_run: bool = Field(default=False, description="report the changes without making them")


class ChangeOut(BaseModel):
    table: str
    policy: str
    change: str = Field(description="enrolled | re-enrolled | updated | retired")
    reason: str


class CatalogListedOut(BaseModel):
    catalog: str
    tables: int
    complete: bool = Field(description="every namespace was listed; an incomplete listing retires nothing")
    failures: list[str]
    unreadable: list[str]


class SkippedOut(BaseModel):
    table: str
    reason: str


class DiscoveryOut(BaseModel):
    policies: list[str]
    dry_run: bool
    counts: dict[str, int]
    catalogs: list[CatalogListedOut]
    changes: list[ChangeOut]
    skipped: list[SkippedOut]
    notes: list[str] = Field(
        description="about the pass itself, e.g. a policy that names no registered catalog"
    )


class EnrolmentOut(BaseModel):
    id: int
    at: datetime
    policy: str
    table_id: str
    change: str
    reason: str


@router.post("", response_model=DiscoveryOut)
def run_discovery(body: DiscoveryIn, request: Request, user: GetUserDep, store: StoreDep) -> Any:
    """One discovery pass now: new tables enrolled, dropped ones retired, each change recorded."""
    from airflow_tablemgmt.services.enrolment import discover

    authorize_dags(request, user, "PUT", [None])
    return discover(store, policy=body.policy, dry_run=body.dry_run).to_dict()


@router.get("/enrolments", response_model=list[EnrolmentOut])
def get_enrolments(
    store: StoreDep,
    policy: Annotated[str | None, Query(max_length=63, pattern=TEXT_PATTERN)] = None,
    table: Annotated[str | None, Query(max_length=386, pattern=TEXT_PATTERN)] = None,
    change: Annotated[str | None, Query(max_length=16)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Any:
    """What discovery changed, newest first: when, which policy, which table, what and why."""
    from airflow_tablemgmt.services.enrolment import enrolment_records

    records = enrolment_records(store, policy=policy, table=table, change=change, limit=limit)
    return [r.to_dict() for r in records]
