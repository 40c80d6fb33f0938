"""``/overview``: the page's first view, from one request (services/overview.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Depends

from airflow_tablemgmt.api.deps import get_store
from airflow_tablemgmt.api.fleet_schemas import OverviewWithFleetOut
from airflow_tablemgmt.api.views import json_safe

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

router = APIRouter(tags=["tables"])
StoreDep = Annotated["Store", Depends(get_store)]


@router.get("/overview", response_model=OverviewWithFleetOut)
def get_overview(store: StoreDep) -> OverviewWithFleetOut:
    """Tables, data size and files (of the tables measured), how many need attention and why, failing
    and waiting work, maintenance done in the last 24 h and 7 days (files and bytes removed), and the
    last 30 days per day; the fleet: each policy's tables, enrolment changes, runs skipped for
    health and cost per day over the last 7 days. Health figures come from the one-minute cache; nothing reads Iceberg here."""
    from airflow_tablemgmt.services.overview import overview

    return OverviewWithFleetOut(**json_safe(overview(store)))
