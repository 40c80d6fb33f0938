"""The overview's ``fleet`` (``services/fleet.py``): policies, enrolment changes, health skips, cost per day."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from airflow_tablemgmt.api.schemas import OverviewOut


class FleetCostOut(BaseModel):
    runs: int = Field(description="finished processes")
    measured: int = Field(description="of which Spark's metrics measured the cost")
    core_seconds: float = Field(description="executor core-seconds: task run time summed")
    bytes_read: int
    bytes_written: int


class FleetPerDayOut(BaseModel):
    core_hours: float = Field(description="executor core-hours per day: the window's sum / days")
    bytes_read: int
    bytes_written: int


class FleetPolicyOut(BaseModel):
    name: str
    description: str = ""
    owner: str | None = Field(None, description="code (a declarations file) or store (REST, CLI)")
    exists: bool = Field(description="false: deleted, its tables not retired by discovery yet")
    error: str | None = Field(None, description="why its stored spec no longer validates")
    tables: int = Field(description="live tables the policy manages")
    enrolled: int = Field(description="tables enrolled (or re-enrolled) in the window")
    retired: int = Field(description="tables retired in the window")
    updated: int = Field(description="enrolled tables whose settings changed in the window")
    skipped: int = Field(description="runs on its tables the health gate skipped in the window")
    cost: FleetCostOut = Field(description="the window's cost, its UTC days summed")
    per_day: FleetPerDayOut


class FleetDayOut(FleetCostOut):
    day: str = Field(description="UTC day, YYYY-MM-DD")
    policy: str


class FleetEnrolmentOut(BaseModel):
    at: datetime
    policy: str
    table: str
    change: str = Field(description="enrolled | re-enrolled | updated | retired")
    reason: str
    live: bool = Field(description="the table is registered and not retired (it has a page)")


class FleetSkipOut(BaseModel):
    process_id: int
    table: str
    action: str
    finished_at: datetime
    policy: str | None = Field(None, description="the policy managing the table; null: declared on its own")
    live: bool
    reason: str = Field(description="'does not pay now: ...' (or 'nothing to do: ...') with the figures")
    score: int | None = Field(None, description="the table's health score when it was skipped")
    figures: dict[str, Any] = Field(
        default_factory=dict, description="the figures and thresholds that decided"
    )


class FleetOut(BaseModel):
    """Policies and what they did over the last ``days`` days (empty ``policies``: the store holds none)."""

    days: int
    since: datetime = Field(description="the window's start for enrolment changes and skips")
    first_day: str = Field(description="the first UTC day of the cost window (today included)")
    skipped: int = Field(description="runs the health gate skipped in the window, every table")
    policies: list[FleetPolicyOut]
    cost_daily: list[FleetDayOut] = Field(description="cost per UTC day and policy, newest day first")
    enrolments: list[FleetEnrolmentOut] = Field(description="the newest enrolment changes of the window")
    skips: list[FleetSkipOut] = Field(description="the newest runs the health gate skipped in the window")
    age_s: float = Field(0.0, description="seconds since the figures were computed (reused for a minute)")


class OverviewWithFleetOut(OverviewOut):
    """The overview (``OverviewOut``) with its fleet section."""

    fleet: FleetOut | None = Field(None, description="policies and what they did (services/fleet.py)")
    fleet_pending: bool = Field(
        False, description="the fleet is being computed (an api-server's first overview): ask again"
    )
