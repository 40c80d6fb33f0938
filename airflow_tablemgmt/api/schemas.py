"""Request and response bodies of ``/tablemgmt/v1``.

Responses embed the core models (``TableSpec``) and mirror the services' dataclasses; request bodies
only check JSON types: every rule about values lives in the services, so the REST API and the CLI
answer a bad value with the same message.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import TableSpec

Name = Field(min_length=1, max_length=250)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorOut(BaseModel):
    detail: str
    field: str
    errors: list[Any] | None = None


class CatalogIn(Body):
    """A store-owned catalog. ``properties`` hold secrets only as references (``{"secret": ...}``)."""

    name: str = Name
    type: str | None = None
    warehouse: str | None = None
    properties: dict[str, str] = Field(default_factory=dict)


class CatalogUpdate(Body):
    type: str | None = None
    warehouse: str | None = None
    properties: dict[str, str] = Field(default_factory=dict)


class CatalogOut(BaseModel):
    name: str
    type: str
    warehouse: str | None
    properties: dict[str, Any]
    outcome: Literal["created", "updated", "unchanged"] | None = None


class TableChange(Body):
    """Fields of a table to set; an existing table keeps every field and action not named here."""

    format: str | None = None
    owner: str | None = None
    queue: str | None = None
    priority: int | None = None
    actions: dict[str, dict[str, Any] | None] | None = Field(
        default=None, description="action name -> its options (null or {} enables it with defaults)"
    )
    replace_actions: bool = Field(default=False, description="the table's actions become exactly `actions`")


class TableIn(TableChange):
    catalog: str = Name
    namespace: str = Name
    name: str = Name
    catalog_type: str | None = Field(default=None, description="create the catalog if missing")
    warehouse: str | None = Field(default=None, description="create the catalog if missing")


class TableSummaryOut(BaseModel):
    table: str
    format: str
    managed_by: str
    owner: str
    queue: str
    actions: list[str]
    last_status: dict[str, ProcessStatus | None] = Field(
        default_factory=dict, description="action -> status of its newest process"
    )


class TablePage(BaseModel):
    items: list[TableSummaryOut]
    total: int
    limit: int
    offset: int


class ProcessOut(BaseModel):
    id: int
    table_id: str
    action: str
    instant: datetime
    status: ProcessStatus
    attempt: int
    engine: str
    external_id: str | None
    snapshot_id: str | None = Field(description="Iceberg snapshot id, as a string (it exceeds 2^53)")
    parameters: dict[str, Any]
    summary: dict[str, Any] | None
    failure_reason: str | None
    dag_id: str | None
    run_id: str | None
    task_id: str | None
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None


class ProcessPage(BaseModel):
    items: list[ProcessOut]
    limit: int
    offset: int


class ActionOut(BaseModel):
    action: str
    dag_id: str
    options: dict[str, Any]
    trigger: str = Field(description="schedule or event")
    interval: str
    schedule: str = Field(description="the schedule in words")
    paused: bool | None = Field(description="null when Airflow has not parsed the DAG yet")
    next_run: datetime | None
    last_process: ProcessOut | None


class TableOut(BaseModel):
    table: str
    managed_by: str
    spec: TableSpec
    actions: list[ActionOut]
    outcome: Literal["created", "updated", "unchanged"] | None = None
    removed_actions: list[str] = Field(default_factory=list)
    catalog_created: bool = False


class RemovedOut(BaseModel):
    table: str
    removed: bool


class RunIn(Body):
    instant: datetime | None = Field(
        default=None,
        description="the process instant (the DAG run's logical date; tz-aware); now, to the second, if absent",
    )


class RunOut(BaseModel):
    process_id: int
    status: ProcessStatus
    instant: datetime
    dag_id: str
    run_id: str


class CancelOut(BaseModel):
    process_id: int
    status: str
    accepted: bool


class FileStatsOut(BaseModel):
    snapshot_id: str | None
    snapshots: int
    data_files: int
    small_data_files: int
    small_file_ratio: float
    small_file_threshold_bytes: int
    delete_files: int
    data_bytes: int
    delete_bytes: int
    records: int


class ActionHealthOut(BaseModel):
    action: str
    last_success: datetime | None
    last_success_process: int | None
    last_failure: datetime | None
    last_failure_process: int | None
    last_failure_reason: str | None


class HealthOut(BaseModel):
    table: str
    files: FileStatsOut | None
    read_at: datetime
    error: str | None
    actions: list[ActionHealthOut]
