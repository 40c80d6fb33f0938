"""Request and response bodies of ``/tablemgmt/v1``: catalogs, tables, processes, health and the overview
(the dynamic tables' are in :mod:`airflow_tablemgmt.api.dynamic_schemas`).

Responses embed the core models (``TableSpec``) and mirror the services' dataclasses; request bodies
only check JSON types: every rule about values lives in the services, so the REST API and the CLI
answer a bad value with the same message. Their numbers and booleans are strict (``StrictInt``,
``StrictBool``): JSON's ``0`` is not ``false`` nor ``"3"`` a priority, so a body the document refuses is
refused (schemathesis' ``negative_data_rejection``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator

from airflow_tablemgmt.core.identifiers import (
    IDENTIFIER_PATTERN,
    IDENTIFIER_RULE,
    NAMESPACE_MAX_LEN,
    NAMESPACE_PATTERN,
    NAMESPACE_RULE,
)
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogType, TableSpec

# The identifier rules of core/identifiers.py, so the OpenAPI document says what a name may be.
Name = Field(
    min_length=1, max_length=128, pattern=IDENTIFIER_PATTERN, description=f"an identifier: {IDENTIFIER_RULE}"
)
# An absolute path or a URI (services.catalogs.check_warehouse), at most the store's column.
WAREHOUSE_PATTERN = r"^(/|[A-Za-z][A-Za-z0-9+.-]*:)[^\x00-\x1f\x7f-\x9f]*$"
Warehouse = Field(
    default=None, max_length=2048, pattern=WAREHOUSE_PATTERN, description="an absolute path or a URI"
)
NamespaceName = Field(
    min_length=1,
    max_length=NAMESPACE_MAX_LEN,
    pattern=NAMESPACE_PATTERN,
    description=f"a namespace: {NAMESPACE_RULE}",
)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorOut(BaseModel):
    detail: str
    field: str
    errors: list[Any] | None = None


class NotFoundOut(BaseModel):
    """A 404: the plugin's answers name the ``field`` (``table_id``, ``path``...); a path Airflow's
    api-server does not route to the plugin at all (one holding a newline: its mount pattern stops
    there) is answered by Airflow itself, ``{"detail": "Not Found"}`` without one."""

    detail: str
    field: str | None = None


class CatalogIn(Body):
    """A store-owned catalog. ``properties`` hold secrets only as references (``{"secret": ...}``)."""

    name: str = Name
    type: CatalogType | None = None
    warehouse: str | None = Warehouse
    properties: dict[str, str] = Field(default_factory=dict)


class CatalogUpdate(Body):
    """A change to a catalog: a field left out keeps its value (``properties: {}`` clears them)."""

    type: CatalogType | None = None
    warehouse: str | None = Warehouse
    properties: dict[str, str] | None = Field(default=None, description="left out: kept; {}: cleared")


class CatalogRemovedOut(BaseModel):
    name: str
    removed: bool


class CatalogOut(BaseModel):
    name: str
    type: str
    warehouse: str | None
    properties: dict[str, Any]
    outcome: Literal["created", "updated", "unchanged"] | None = None
    problem: str | None = Field(
        default=None,
        description="set when the stored catalog no longer validates (e.g. a plaintext secret written before "
        "secrets had to be references): what to migrate; secret values are masked all the same",
    )


class TableChange(Body):
    """Fields of a table to set; an existing table keeps every field and action not named here."""

    format: str | None = None
    owner: str | None = None
    queue: str | None = Field(
        default=None, max_length=128, pattern=IDENTIFIER_PATTERN, description="an Airflow pool"
    )
    priority: StrictInt | None = None
    actions: dict[str, dict[str, Any] | None] | None = Field(
        default=None, description="action name -> its options (null or {} enables it with defaults)"
    )
    replace_actions: StrictBool = Field(
        default=False, description="the table's actions become exactly `actions`"
    )


class TableIn(TableChange):
    catalog: str = Name
    namespace: str = NamespaceName
    name: str = Name
    catalog_type: CatalogType | None = Field(default=None, description="create the catalog if missing")
    warehouse: str | None = Field(
        default=None, max_length=2048, pattern=WAREHOUSE_PATTERN, description="create the catalog if missing"
    )


class BadgeOut(BaseModel):
    """An action's badge on the list: its newest process, last success and failing streak."""

    last_process: int | None = None
    last_status: ProcessStatus | None = None
    last_instant: datetime | None = None
    last_finished: datetime | None = None
    last_reason: str | None = None
    last_success: datetime | None = None
    failing_streak: int = Field(default=0, description="FAILED/KILLED processes in a row, newest first")


class FindingOut(BaseModel):
    kind: str = Field(
        description="small_files, delete_files, snapshots or manifests; or a format's own (its health hook)"
    )
    points: int = Field(description="what it takes off the score")
    action: str = Field(description="the maintenance action that would fix it")
    reason: str


class HealthScoreOut(BaseModel):
    """The health score (docs/ui.md, metadata/health.py): 100 minus the points of each finding; a finding
    exists exactly when an action would help (needs_attention)."""

    score: int = Field(ge=0, le=100)
    needs_attention: bool
    findings: list[FindingOut]


class RowHealthOut(HealthScoreOut):
    data_files: int
    small_data_files: int
    data_bytes: int
    delete_files: int
    snapshots: int
    age_s: float = Field(description="seconds since the figures were read (cached)")
    format: str | None = Field(default=None, description="the format whose health hook measured the table")
    format_figures: dict[str, Any] | None = Field(
        default=None, description="the format's own figures (its health hook); null for the built-in ones"
    )


class TableSummaryOut(BaseModel):
    table: str
    format: str
    managed_by: str
    policy: str | None = Field(default=None, description="the policy that enrolled it (managed_by policy)")
    owner: str
    queue: str
    actions: list[str]
    last_status: dict[str, ProcessStatus | None] = Field(
        default_factory=dict, description="action -> status of its newest process"
    )
    badges: dict[str, BadgeOut] = Field(default_factory=dict, description="action -> its badge")
    health: RowHealthOut | None = Field(
        default=None, description="the cached health read; null until the table has been measured"
    )
    dynamic: dict[str, Any] | None = Field(default=None, description="a dynamic table's state and freshness")


class TablePage(BaseModel):
    items: list[TableSummaryOut]
    total: int
    limit: int
    offset: int
    measuring: int = Field(default=0, description="tables of this page whose health is being read now")
    measured: int = Field(default=0, description="tables with a cached health read")


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
    lease_acquired_at: datetime | None = None
    timings: dict[str, float | None] = Field(
        default_factory=dict,
        description="lease_wait_s (opened -> the table's lease taken; null: no lease), queue_wait_s (the "
        "lease taken -> running), wait_s (opened -> running: both), run_s (running -> finished, the CLI's "
        "RUN), job_s (the Spark job), total_s (opened -> finished): services.processes.timings",
    )
    removed: dict[str, int] = Field(
        default_factory=dict,
        description="files and bytes the process removed (0 unless it succeeded): the figure the overview's "
        "files removed sums, services.overview.removed_by",
    )
    core_seconds: float | None = Field(
        None, description="executor core-seconds: the run's Spark task run time summed (null: not measured)"
    )
    cpu_seconds: float | None = Field(None, description="the CPU time of the same tasks (null: not measured)")
    bytes_read: int | None = Field(
        None, description="bytes the run's tasks read from storage (null: not measured)"
    )
    bytes_written: int | None = Field(
        None, description="bytes the run's tasks wrote to storage (null: not measured)"
    )


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
    policy: str | None = Field(default=None, description="the policy that enrolled it (managed_by policy)")
    spec: TableSpec
    actions: list[ActionOut]
    outcome: Literal["created", "updated", "unchanged"] | None = None
    removed_actions: list[str] = Field(default_factory=list)
    catalog_created: bool = False
    warnings: list[str] = Field(default_factory=list, description="e.g. a location not readable by the API")


class RemovedOut(BaseModel):
    table: str
    removed: bool


class RunIn(Body):
    # Text, not datetime: pydantic would read a number as a Unix time and a naive time as valid; the
    # service checks it (core.instants) and names the value and the allowed window.
    instant: str | None = Field(
        default=None,
        json_schema_extra={"format": "date-time"},
        description="the process instant (the DAG run's logical date): ISO 8601 with a time zone, between "
        "the DAG's start date and now + 5 minutes; now, to the second, if absent",
    )

    @field_validator("instant", mode="before")
    @classmethod
    def _text_only(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            from airflow_tablemgmt.core.instants import check_run_instant

            check_run_instant(value)  # raises, naming the value and what is allowed
        return value


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
    target_file_size_bytes: int = 0
    compacted_data_files: int = Field(default=0, description="files a compaction to the target would leave")
    excess_data_files: int = Field(default=0, description="small files a compaction would remove")
    min_input_files: int = 0
    partitions: int = 0
    deleted_rows: int = 0
    deleted_row_ratio: float = 0.0
    manifests: int = 0
    manifest_bytes: int = 0
    expirable_snapshots: int = Field(default=0, description="snapshots expire-snapshots would drop")
    oldest_snapshot_age_s: float | None = None
    current_snapshot_age_s: float | None = None
    snapshot_max_age_s: float = 0.0
    position_delete_files: int = Field(default=0, description="of delete_files: v2 position delete files")
    equality_delete_files: int = Field(default=0, description="of delete_files: equality delete files")
    deletion_vectors: int = Field(
        default=0, description="of delete_files: v3 deletion vectors (one per data file, in Puffin files)"
    )
    dv_deleted_rows: int = Field(default=0, description="of deleted_rows: the rows deletion vectors mark")
    dv_bytes: int = Field(default=0, description="the deletion vectors' own bytes (their blobs)")
    dv_files: int = Field(default=0, description="the Puffin files that hold the deletion vectors")
    format_version: int | None = Field(default=None, description="the table's Iceberg format version")


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
    health: HealthScoreOut | None = None
    format_health: dict[str, Any] | None = Field(
        default=None,
        description="a format with its own health hook: {format, figures, findings} (its figures replace files)",
    )


class OverviewOut(BaseModel):
    """The overview page (services/overview.py): store aggregates plus the cached health reads."""

    model_config = ConfigDict(extra="allow")

    now: datetime
    tables: int
    measured_tables: int
    needs_attention: int
