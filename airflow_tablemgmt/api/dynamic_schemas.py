"""Request and response bodies of ``/tablemgmt/v1/dynamic-tables`` (api/dynamic.py): the declaration,
its views, FLIP-435's refresh request and answer, alter and resume.

Like :mod:`airflow_tablemgmt.api.schemas` (whose strict ``Body`` base they share), request bodies check
only JSON types: the declaration's rules and their messages are ``services.dynamic``'s, so REST and
``tablemgmt dt`` answer a bad value alike.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from airflow_tablemgmt.api.schemas import Body
from airflow_tablemgmt.core.identifiers import (
    IDENTIFIER_PATTERN,
    NAMESPACE_MAX_LEN,
    NAMESPACE_PATTERN,
    TABLE_ID_PATTERN,
)
from airflow_tablemgmt.core.process import ProcessStatus


class DynamicTableIn(BaseModel):
    """A dynamic table's declaration, with the same keys as a ``dynamic-tables:`` entry in tables.yaml
    (kebab-case; Flink's ``partition.fields.<col>.date-formatter`` keys are accepted too). Only JSON
    types are checked here; the declaration's rules (and their messages) are the service's."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    identifier: str | None = Field(
        default=None,
        max_length=400,
        pattern=TABLE_ID_PATTERN,
        description="catalog.namespace.name (or give the three)",
    )
    catalog: str | None = Field(default=None, max_length=128, pattern=IDENTIFIER_PATTERN)
    namespace: str | None = Field(default=None, max_length=NAMESPACE_MAX_LEN, pattern=NAMESPACE_PATTERN)
    name: str | None = Field(default=None, max_length=128, pattern=IDENTIFIER_PATTERN)
    query: str | None = Field(default=None, description="one Spark SQL SELECT (or WITH) statement")
    freshness: str | None = Field(
        default=None, description="e.g. '5 MINUTE', '1 HOUR', '1 DAY', 'downstream'"
    )
    refresh_mode: str | None = Field(
        default=None,
        alias="refresh-mode",
        description="AUTO (default: incremental where the query allows it, else full, recording why), FULL or "
        "INCREMENTAL (refused, naming the construct, for a query that cannot be maintained incrementally)",
    )
    partitioned_by: list[str] | None = Field(default=None, alias="partitioned-by")
    partition_fields: dict[str, dict[str, str]] | None = Field(
        default=None, alias="partition-fields", description='col -> {"date-formatter": "yyyy-MM-dd"}'
    )
    time_zone: str | None = Field(default=None, alias="time-zone", description="IANA zone, default UTC")
    owner: str | None = None
    queue: str | None = Field(
        default=None, max_length=128, pattern=IDENTIFIER_PATTERN, description="an Airflow pool"
    )
    priority: StrictInt | None = None
    retries: StrictInt | None = None
    retry_delay: str | None = Field(default=None, alias="retry-delay")
    suspend_after_failures: StrictInt | None = Field(default=None, alias="suspend-after-failures")
    timeout: str | None = Field(
        default=None,
        description="how long one refresh may take, e.g. '30m'; default [tablemgmt] refresh_timeout, else the "
        "freshness period; at most [tablemgmt] refresh_timeout_max",
    )

    def definition(self) -> dict[str, Any]:
        """The declaration as the service takes it: the keys given, kebab-case, extras included."""
        return {**self.model_dump(by_alias=True, exclude_unset=True), **(self.model_extra or {})}


class RefreshOut(BaseModel):
    """One refresh (a process of action ``refresh``) in Snowflake's refresh-history columns."""

    process_id: int = Field(description="the process id (FLIP-435's jobId)")
    state: ProcessStatus
    reason: str | None = Field(description="why it failed (or was canceled)")
    trigger: str | None = Field(description="SCHEDULED, MANUAL or CREATION")
    refresh_action: str | None = Field(
        description="FULL, PARTITION, INCREMENTAL or NO_DATA; null until it ran"
    )
    refresh_mode: str | None = Field(
        default=None,
        description="the mode it ran in (FULL or INCREMENTAL); null until it ran, and for NO_DATA",
    )
    refresh_mode_reason: str | None = Field(
        default=None,
        description="why it ran in that mode (e.g. 'MERGE_BY_KEY: <source>: 1 append snapshot(s) since …', "
        "'… it uses a window function (row_number)', '<source>: snapshot … is a delete …', 'no previous state …')",
    )
    schedule_time: str | None
    source_snapshots: dict[str, str | None] = Field(
        default_factory=dict, description="source table -> Iceberg snapshot id read (as a string)"
    )
    partitions_written: list[dict[str, Any]] = Field(default_factory=list)
    rows_written: int | None = None
    duration_seconds: float | None = None
    application_id: str | None = Field(default=None, description="the Spark application id")
    attempt: int
    started_at: datetime | None
    finished_at: datetime | None
    dag_run_id: str | None


class RefreshModeOut(BaseModel):
    """A dynamic table's refresh mode: declared, the mode its refreshes get and why (issue 41)."""

    declared: str = Field(description="the table's refresh-mode: AUTO, FULL or INCREMENTAL")
    mode: str | None = Field(
        description="the mode its refreshes get (FULL in this version); null when the declared INCREMENTAL "
        "is not possible for its query (reason says why; its refreshes fail with it)"
    )
    reason: str = Field(description="why that mode")
    incremental: dict[str, Any] | None = Field(
        description="the last refresh's analysis of the query: incremental, strategy, reason, construct, "
        "sources, notes; null until a refresh analysed the current query"
    )


class DynamicTableSummaryOut(BaseModel):
    table: str
    state: str = Field(description="CREATING, ACTIVE or SUSPENDED")
    freshness: str
    cron: str | None = Field(description="the refresh DAG's cron (UTC); null for freshness downstream")
    managed_by: str
    refresh_mode: RefreshModeOut
    last_refresh: RefreshOut | None


class DynamicTablePage(BaseModel):
    items: list[DynamicTableSummaryOut]
    total: int
    limit: int
    offset: int


class DynamicTableOut(DynamicTableSummaryOut):
    definition: dict[str, Any] = Field(description="the declaration, kebab-case, as stored")
    dag_id: str
    paused: bool | None = Field(description="null when Airflow has not parsed the DAG yet")
    next_run: datetime | None
    consecutive_failures: int
    suspend_after_failures: int
    suspended_reason: str | None
    dynamic_options: dict[str, Any]
    outcome: Literal["created", "altered", "suspended", "resumed"] | None = None


class DynamicTableCreatedOut(DynamicTableOut):
    """A dynamic table declared (CREATING); its creation runs on a worker, in the refresh DAG's task."""

    creation: Literal["triggered", "waiting for the DAG"] = Field(
        description="triggered: the creation's DAG run is queued (process_id, dag_run_id); waiting for the "
        "DAG: Airflow has not parsed the refresh DAG yet, its first run creates the table (or POST "
        "…/refresh once it has)"
    )
    process_id: int | None = Field(default=None, description="the creation's process (GET /processes/{id})")
    dag_run_id: str | None = None


class DroppedOut(BaseModel):
    table: str
    dropped: bool
    purged: bool = Field(description="the Iceberg table was dropped too")


class AlterIn(Body):
    freshness: str | None = Field(default=None, description="a new freshness; the DAG is rescheduled")
    query: str | None = Field(default=None, description="a new query; the next refresh uses it")
    recreate: StrictBool = Field(
        default=False, description="allow a query whose schema differs: the table is recreated"
    )
    timeout: str | None = Field(
        default=None,
        description="a new limit for one refresh, e.g. '30m' (as at create; at most [tablemgmt] "
        "refresh_timeout_max); the refresh task takes it when Airflow next parses the DAG",
    )
    refresh_mode: str | None = Field(
        default=None,
        description="AUTO, FULL or INCREMENTAL; INCREMENTAL is checked against the analysis the table's last "
        "refresh recorded (422 naming the construct when its query cannot be maintained incrementally)",
    )


class ResumeIn(Body):
    dynamic_options: dict[str, str] | None = Field(
        default=None, description="options for the refreshes from now on (Flink's RESUME WITH (...))"
    )


class RefreshIn(BaseModel):
    """FLIP-435's refresh request (Flink's field names)."""

    model_config = ConfigDict(extra="forbid")

    isPeriodic: StrictBool = Field(default=False, description="a periodic refresh of scheduleTime's period")
    scheduleTime: str | None = Field(
        default=None, description="'yyyy-MM-dd HH:mm:ss' in the table's time zone; required when periodic"
    )
    staticPartitions: dict[str, str] = Field(
        default_factory=dict, description="partition column -> value to refresh (manual refreshes)"
    )
    dynamicOptions: dict[str, str] = Field(default_factory=dict, description="options for this refresh")


class ClusterInfoOut(BaseModel):
    master: str | None = Field(description="where the Spark job is submitted (spark_default's master)")
    applicationId: str | None = Field(description="the Spark application id; null until the job starts")


class RefreshJobOut(BaseModel):
    """FLIP-435's refresh response: the refresh is submitted (its process exists, its DAG run is queued)."""

    jobId: int = Field(description="the refresh's process id")
    dagRunId: str | None = Field(description="the refresh DAG's run")
    clusterInfo: ClusterInfoOut
