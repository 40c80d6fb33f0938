"""Dynamic tables (FLIP-435): a table bound to a query and a freshness, refreshed by Airflow.

The definition (:class:`DynamicTableSpec`) is validated here the same way whether it comes from
``dynamic-tables:`` in ``tables.yaml``, ``tablemgmt dt create`` or REST. Its maintenance-side view
(:meth:`DynamicTableSpec.table_spec`) is an ordinary :class:`TableSpec` with one action, ``refresh``,
scheduled on the freshness cron (or, for ``freshness: downstream``, on its upstream tables' refreshes).
The states a table and a refresh go through are here too. (Just over 400 lines since the refresh modes
came in; the states move to a module of their own next, with the incremental execution.)
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from airflow_tablemgmt.core.durations import Duration
from airflow_tablemgmt.core.dynamic import refresh
from airflow_tablemgmt.core.dynamic.date_patterns import DateFormatter, partition_values, zone
from airflow_tablemgmt.core.dynamic.query import check_query, named_tables, referenced_tables
from airflow_tablemgmt.core.dynamic.refresh import REFRESH
from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.identifiers import TableIdentifier, validate_identifier, validate_namespace
from airflow_tablemgmt.core.naming import dag_id_length_problem
from airflow_tablemgmt.core.notify import NotifySpec
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.core.text import OWNER_MAX_LEN, check_text
from airflow_tablemgmt.core.triggers import Freshness


class RefreshMode(StrEnum):
    """How a dynamic table is refreshed (Snowflake's ``REFRESH_MODE``): ``AUTO`` (the default: incrementally
    where the query allows it, else in full, recording why), ``FULL`` (the whole query every time) or
    ``INCREMENTAL`` (only from the sources' changes; a query that cannot be maintained so is refused when
    Spark analyses it, naming the construct: :mod:`.incremental`). Written in any case in a declaration."""

    AUTO = "AUTO"
    FULL = "FULL"
    INCREMENTAL = "INCREMENTAL"


REFRESH_MODE_RULE = (
    "AUTO (the default: incremental where the query allows it, else full, recording why), FULL or INCREMENTAL"
)


class RefreshTrigger(StrEnum):
    """What started a refresh (Snowflake's refresh-history ``REFRESH_TRIGGER``)."""

    SCHEDULED = refresh.SCHEDULED
    MANUAL = refresh.MANUAL
    CREATION = refresh.CREATION


class RefreshAction(StrEnum):
    """What a refresh did (Snowflake's ``REFRESH_ACTION``)."""

    FULL = "FULL"
    PARTITION = "PARTITION"
    NO_DATA = "NO_DATA"
    INCREMENTAL = "INCREMENTAL"  # the sources' change merged in (refresh_mode INCREMENTAL)


class DynamicState(StrEnum):
    """A dynamic table's state: ``CREATING`` until its first refresh created it."""

    CREATING = "CREATING"
    ACTIVE = "ACTIVE"
    SUSPENDED = "SUSPENDED"


def _kebab(name: str) -> str:
    return name.replace("_", "-")


def _freshness(value: Any) -> Freshness:
    try:
        return Freshness.parse(value)
    except InvalidDeclaration as e:
        raise ValueError(str(e).removeprefix("freshness: ")) from None


FreshnessField = Annotated[
    Freshness,
    PlainValidator(_freshness),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "examples": ["5 MINUTE", "1 HOUR", "1 DAY", "downstream"]}),
]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=_kebab, populate_by_name=True, extra="forbid", frozen=True)


class PartitionField(_Model):
    """How a partition column's value is derived from the schedule time."""

    date_formatter: str = Field(description="Java date pattern, e.g. yyyy-MM-dd, yyyyMMdd, HH")

    @field_validator("date_formatter")
    @classmethod
    def _pattern(cls, v: str) -> str:
        try:
            DateFormatter(v)
        except InvalidDeclaration as e:
            raise ValueError(str(e).removeprefix("date-formatter: ")) from None
        return v


class Column(_Model):
    """One column of the table's schema, as Spark's analysis of the query gave it."""

    name: str
    type: str
    nullable: bool = True


_FLINK_PARTITION_KEY = re.compile(r"partition\.fields\.(?P<col>[^.]+)\.(?P<option>.+)")


class DynamicTableSpec(_Model):
    """A dynamic table's definition: identifier, query, freshness, partitioning, and the knobs its
    refresh DAG takes (owner, queue, priority, retries, retry-delay, suspend-after-failures, timeout).

    ``schema`` (attribute ``columns``) and ``source-tables`` are filled at creation by Spark's
    analysis of the query, never at parse.
    """

    catalog: str
    namespace: str
    name: str
    query: str = Field(description="one Spark SQL SELECT (or WITH ... SELECT) statement")
    freshness: FreshnessField
    refresh_mode: Annotated[
        RefreshMode,
        WithJsonSchema(
            {
                "type": "string",
                "enum": [*(m.value for m in RefreshMode), *(m.value.lower() for m in RefreshMode)],
                "description": f"how the table is refreshed: {REFRESH_MODE_RULE}",
            }
        ),
    ] = RefreshMode.AUTO
    partitioned_by: list[str] = Field(default_factory=list)
    partition_fields: dict[str, PartitionField] = Field(default_factory=dict)
    time_zone: str = Field(default="UTC", description="IANA time zone the partition values are formatted in")
    owner: str = Field(default="airflow", description="the refresh DAG's owner")
    queue: str = Field(default="default", description="Airflow pool (and queue) the refreshes run in")
    priority: int = Field(default=1, ge=1, le=1000)
    retries: int = Field(default=1, ge=0, le=20)
    retry_delay: Duration = timedelta(minutes=5)
    suspend_after_failures: int = Field(
        default=5, ge=1, description="consecutive failed scheduled refreshes before the table is suspended"
    )
    timeout: Duration | None = Field(
        default=None,
        description="how long one refresh may take: default [tablemgmt] refresh_timeout, else the freshness "
        "period; at most [tablemgmt] refresh_timeout_max (core/time_limits.py)",
    )
    notify: NotifySpec | None = Field(default=None, description="notifications (docs/notifications.md)")
    columns: list[Column] | None = Field(
        default=None, alias="schema", description="filled at creation from Spark's analysis of the query"
    )
    source_tables: list[str] | None = Field(
        default=None, description="filled at creation: the tables the query reads (catalog.namespace.name)"
    )

    @model_validator(mode="before")
    @classmethod
    def _inputs(cls, data: Any) -> Any:
        """``identifier: cat.ns.name`` and Flink's ``partition.fields.<col>.date-formatter`` keys."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        if "identifier" in data:
            ident = data.pop("identifier")
            clash = [k for k in ("catalog", "namespace", "name") if k in data]
            if clash:
                raise ValueError(f"identifier: give either identifier or {', '.join(clash)}, not both")
            parts = ident.split(".") if isinstance(ident, str) else []
            if len(parts) < 3:
                raise ValueError(
                    f"identifier: {ident!r} must be written catalog.namespace.name (a namespace of several "
                    "levels is written with dots too: catalog.level1.level2.name)"
                )
            # as TableIdentifier.parse: the first part the catalog, the last the table, the rest the namespace
            data["catalog"], data["namespace"], data["name"] = parts[0], ".".join(parts[1:-1]), parts[-1]
        flink = {
            k: data.pop(k) for k in [k for k in data if isinstance(k, str) and k.startswith("partition.")]
        }
        if flink:
            fields: dict[str, Any] = {}
            given = data.get("partition-fields", data.get("partition_fields")) or {}
            if isinstance(given, Mapping):
                fields = {c: dict(v) if isinstance(v, Mapping) else v for c, v in given.items()}
            for key, value in flink.items():
                m = _FLINK_PARTITION_KEY.fullmatch(key)
                if m is None or m.group("option") != "date-formatter":
                    raise ValueError(
                        f"{key}: unknown option; allowed: partition.fields.<column>.date-formatter"
                    )
                col = m.group("col")
                entry = fields.setdefault(col, {})
                if isinstance(entry, dict):
                    if "date-formatter" in entry or "date_formatter" in entry:
                        raise ValueError(
                            f"{key}: the date formatter of {col} is given twice (also under partition-fields)"
                        )
                    entry["date-formatter"] = value
            data.pop("partition_fields", None)
            data["partition-fields"] = fields
        return data

    @field_validator("catalog", "name")
    @classmethod
    def _ident(cls, v: str, info: Any) -> str:
        return validate_identifier(v, info.field_name)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        """One level or several (``sales.eu``), as a maintained table's (REST catalogs nest them)."""
        return validate_namespace(v)

    @field_validator("queue")
    @classmethod
    def _queue(cls, v: str) -> str:
        return validate_identifier(v, "queue")

    _owner = field_validator("owner")(lambda v: check_text(v, "owner", OWNER_MAX_LEN))

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        try:
            return check_query(v)
        except InvalidDeclaration as e:
            raise ValueError(str(e).removeprefix("query: ")) from None

    @field_validator("refresh_mode", mode="before")
    @classmethod
    def _mode(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().upper() in RefreshMode.__members__:
            return RefreshMode[v.strip().upper()]
        raise ValueError(f"{v!r} is not a refresh mode; allowed: {REFRESH_MODE_RULE}")

    @field_validator("partitioned_by")
    @classmethod
    def _partitioned_by(cls, v: list[str]) -> list[str]:
        seen = set()
        for col in v:
            validate_identifier(col, "partitioned-by")
            if col.lower() in seen:
                raise ValueError(f"partitioned-by: {col!r} is listed twice")
            seen.add(col.lower())
        return v

    @field_validator("time_zone")
    @classmethod
    def _time_zone(cls, v: str) -> str:
        try:
            zone(v)
        except InvalidDeclaration as e:
            raise ValueError(str(e).removeprefix("time-zone: ")) from None
        return v

    @field_validator("source_tables")
    @classmethod
    def _sources(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            for t in v:
                TableIdentifier.parse(t)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> DynamicTableSpec:
        partitioned = {c.lower() for c in self.partitioned_by}
        for col in self.partition_fields:
            if col.lower() not in partitioned:
                raise ValueError(
                    f"partition-fields.{col}: {col!r} has a date formatter but is not in partitioned-by "
                    f"({', '.join(self.partitioned_by) or 'empty'}); add it there or remove the formatter"
                )
        if self.freshness.is_downstream and self.partition_fields:
            raise ValueError(
                f"partition-fields: a 'freshness: downstream' table has no schedule time of its own to "
                f"derive partition values from ({', '.join(self.partition_fields)}); it refreshes in full: "
                "remove the date formatters (partitioned-by may stay) or give a freshness such as '1 DAY'"
            )
        problem = dag_id_length_problem(self.id, [REFRESH])
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def id(self) -> str:
        return f"{self.catalog}.{self.namespace}.{self.name}"

    @property
    def identifier(self) -> TableIdentifier:
        return TableIdentifier(self.catalog, self.namespace, self.name)

    @property
    def cron(self) -> str | None:
        """The refresh DAG's cron (UTC), None for ``freshness: downstream``."""
        return self.freshness.to_cron()

    @property
    def formatters(self) -> dict[str, str]:
        """Partition column -> its date pattern."""
        return {col: f.date_formatter for col, f in self.partition_fields.items()}

    def partition_values(self, schedule_time: datetime) -> dict[str, str]:
        """The partitions a periodic refresh at ``schedule_time`` overwrites (empty: the whole table)."""
        return partition_values(schedule_time, self.freshness, self.formatters, self.time_zone)

    def upstream_candidates(self, known_ids: Collection[str]) -> set[str]:
        """Which of ``known_ids`` (dynamic tables) this table reads: named in its query, or among the
        source tables its creation recorded. Never itself."""
        known = set(known_ids)
        found = referenced_tables(self.query, known) | (set(self.source_tables or ()) & known)
        found.discard(self.id)
        return found

    def table_spec(self, dynamic_ids: Collection[str] | None = None) -> TableSpec:
        """The maintenance-side view: a :class:`TableSpec` whose one action, ``refresh``, carries the
        freshness cron (``interval``), or for ``downstream`` ``trigger: upstream`` and the upstream
        table ids, plus retries and retry-delay.

        Upstream ids: those of ``dynamic_ids`` the table reads; without ``dynamic_ids`` (the store's
        view), every table its query names fully or its creation recorded. The DAG is scheduled on
        any of their refreshes; only dynamic tables' refreshes ever emit one, and the DAG factory
        keeps the registered dynamic tables among them."""
        refresh: dict[str, Any] = {
            "freshness": str(self.freshness),
            "retries": self.retries,
            "retry-delay": self.model_dump(mode="json", include={"retry_delay"})["retry_delay"],
        }
        if self.timeout is not None:
            refresh["timeout"] = self.model_dump(mode="json", include={"timeout"})["timeout"]
        if self.freshness.is_downstream:
            known = (
                set(dynamic_ids)
                if dynamic_ids is not None
                else named_tables(self.query) | set(self.source_tables or ())
            )
            upstream = self.upstream_candidates(known)
            problem = downstream_problem(self, upstream)
            if problem is not None:
                raise InvalidDeclaration(f"dynamic table {self.id}: {problem}")
            refresh["trigger"] = "upstream"
            refresh["upstream"] = sorted(upstream)
        else:
            refresh["trigger"] = "schedule"
            refresh["interval"] = self.cron
        return TableSpec.model_validate(
            {
                "catalog": self.catalog,
                "namespace": self.namespace,
                "name": self.name,
                "owner": self.owner,
                "queue": self.queue,
                "priority": self.priority,
                "actions": {REFRESH: refresh},
                "notify": self.notify,
            }
        )


def parse_dynamic_table(data: Any, source: str = "dynamic table") -> DynamicTableSpec:
    """Validate a definition (REST body, CLI input); errors name the field path and the rule."""
    from pydantic import ValidationError

    from airflow_tablemgmt.core.tables import format_validation_error

    if not isinstance(data, Mapping):
        raise InvalidDeclaration(f"{source}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return DynamicTableSpec.model_validate(data)
    except ValidationError as e:
        raise InvalidDeclaration(format_validation_error(e, source)) from None


def downstream_problem(spec: DynamicTableSpec, upstreams: Collection[str]) -> str | None:
    """Why a ``freshness: downstream`` table cannot be scheduled (no upstream dynamic table), or None."""
    if spec.freshness.is_downstream and not upstreams:
        return (
            f"freshness: downstream needs an upstream dynamic table, and the query of {spec.id} names none "
            "(name it fully, catalog.namespace.table); give a freshness such as '1 HOUR' instead"
        )
    return None
