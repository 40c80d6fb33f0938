"""Dynamic tables (FLIP-435): a table bound to a query and a freshness, refreshed by Airflow.

The definition (:class:`DynamicTableSpec`) is validated here the same way whether it comes from
``dynamic-tables:`` in ``tables.yaml``, ``tablemgmt dt create`` or REST. Its maintenance-side view
(:meth:`DynamicTableSpec.table_spec`) is an ordinary :class:`TableSpec` with one action, ``refresh``,
scheduled on the freshness cron (or, for ``freshness: downstream``, on its upstream tables' refreshes).

Partition refreshes follow Flink's rule: for every partition column with a date formatter, the value
refreshed at ``scheduleTime`` is ``format(scheduleTime - freshness)`` in the table's time zone.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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
from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.identifiers import TableIdentifier, dag_id_length_problem, validate_identifier
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.core.text import OWNER_MAX_LEN, check_no_nul, check_text
from airflow_tablemgmt.core.triggers import Freshness

REFRESH = "refresh"


class RefreshMode(StrEnum):
    """How a refresh rewrites the table. Spark batch refreshes are full (per partition or whole)."""

    FULL = "full"


class RefreshTrigger(StrEnum):
    """What started a refresh (Snowflake's refresh-history ``REFRESH_TRIGGER``)."""

    SCHEDULED = "SCHEDULED"
    MANUAL = "MANUAL"
    CREATION = "CREATION"


class RefreshAction(StrEnum):
    """What a refresh did (Snowflake's ``REFRESH_ACTION``)."""

    FULL = "FULL"
    PARTITION = "PARTITION"
    NO_DATA = "NO_DATA"


class DynamicState(StrEnum):
    """A dynamic table's state: ``CREATING`` until its first refresh created it."""

    CREATING = "CREATING"
    ACTIVE = "ACTIVE"
    SUSPENDED = "SUSPENDED"


# --- Java / Flink date patterns ---------------------------------------------------------------

# letter -> (what it is, the widths supported)
_PATTERN_LETTERS = {
    "y": ("year", (1, 2, 4)),
    "M": ("month 01-12", (1, 2)),
    "d": ("day of month", (1, 2)),
    "H": ("hour 00-23", (1, 2)),
    "m": ("minute", (1, 2)),
    "s": ("second", (1, 2)),
}
PATTERN_RULE = (
    "Java date-pattern letters y (year: yyyy, yy), M (month: MM, M), d (day: dd, d), H (hour 0-23: HH, H), "
    "m (minute: mm, m), s (second: ss, s); other letters must be quoted ('T'); "
    "e.g. yyyy-MM-dd, yyyyMMdd, HH, yyyy-MM-dd HH"
)


class DateFormatter:
    """A Java ``DateTimeFormatter`` pattern as Flink's ``partition.fields.#.date-formatter`` takes it.

    Letters ``y M d H m s`` (repeated for zero padding; ``yy`` is the two-digit year), quoted
    literals (``'T'``, ``''`` for a quote) and any non-letter character as itself.
    """

    def __init__(self, pattern: str, field: str = "date-formatter") -> None:
        self.pattern = pattern
        self._parts = _compile_pattern(pattern, field)

    def format(self, value: datetime) -> str:
        out = []
        for kind, arg in self._parts:
            if kind == "lit":
                out.append(arg)
                continue
            letter, width = arg[0], len(arg)
            number = {
                "y": value.year,
                "M": value.month,
                "d": value.day,
                "H": value.hour,
                "m": value.minute,
                "s": value.second,
            }[letter]
            if letter == "y" and width == 2:
                number %= 100
            out.append(str(number).zfill(width))
        return "".join(out)

    def __repr__(self) -> str:
        return f"DateFormatter({self.pattern!r})"


def _compile_pattern(pattern: str, field: str) -> list[tuple[str, str]]:
    if not isinstance(pattern, str) or not pattern.strip():
        raise InvalidDeclaration(f"{field}: {pattern!r} is not a date pattern; allowed: {PATTERN_RULE}")
    parts: list[tuple[str, str]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            end = i + 1
            text = []
            while True:
                if end >= n:
                    raise InvalidDeclaration(
                        f"{field}: {pattern!r} has an unterminated quote; allowed: {PATTERN_RULE}"
                    )
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            parts.append(("lit", "".join(text) if end > i + 1 else "'"))
            i = end + 1
        elif c.isascii() and c.isalpha():
            j = i
            while j < n and pattern[j] == c:
                j += 1
            run = pattern[i:j]
            if c not in _PATTERN_LETTERS:
                raise InvalidDeclaration(
                    f"{field}: {pattern!r} uses {run!r}, which is not supported; allowed: {PATTERN_RULE}"
                )
            what, widths = _PATTERN_LETTERS[c]
            if len(run) not in widths:
                raise InvalidDeclaration(
                    f"{field}: {pattern!r} uses {run!r} ({what}); allowed widths for {c!r}: "
                    f"{', '.join(c * w for w in widths)}"
                )
            parts.append(("num", run))
            i = j
        elif c.isalpha() or not c.isprintable():
            raise InvalidDeclaration(
                f"{field}: {pattern!r} has {c!r}, which is not allowed; allowed: {PATTERN_RULE}"
            )
        else:
            parts.append(("lit", c))
            i += 1
    if not any(kind == "num" for kind, _ in parts):
        raise InvalidDeclaration(f"{field}: {pattern!r} has no date letters; allowed: {PATTERN_RULE}")
    return parts


def zone(time_zone: str, field: str = "time-zone") -> ZoneInfo:
    """An IANA time zone, or an error naming the field."""
    try:
        if not isinstance(time_zone, str) or not time_zone or time_zone != time_zone.strip():
            raise ValueError(time_zone)
        return ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidDeclaration(
            f"{field}: {time_zone!r} is not an IANA time zone; e.g. UTC, Europe/Berlin, America/New_York, "
            "Asia/Shanghai"
        ) from None


def partition_values(
    schedule_time: datetime,
    freshness: Freshness | str | timedelta,
    formatters: Mapping[str, str | DateFormatter],
    time_zone: str = "UTC",
) -> dict[str, str]:
    """The partition each formatted column refreshes at ``schedule_time``: ``format(scheduleTime -
    freshness)`` in ``time_zone`` (Flink's rule), i.e. the last complete period.

    An aware ``schedule_time`` (an Airflow logical date) is converted to ``time_zone`` first; a naive
    one is read as wall-clock time in ``time_zone`` (as Flink reads the REST ``scheduleTime`` string;
    a wall-clock time that a DST change repeats is its first occurrence, one it skips is read with the
    offset before the change). Sub-day periods are subtracted on the absolute time line, for naive
    inputs too (so each hour of a DST change has its own value, the skipped hour is never produced and
    the repeated one is); a day is subtracted on the wall clock (local midnight minus one day is the
    previous local midnight, also across DST changes).
    """
    tz = zone(time_zone)
    delta = freshness if isinstance(freshness, timedelta) else Freshness.parse(freshness).delta
    if schedule_time.tzinfo is None:
        schedule_time = schedule_time.replace(tzinfo=tz)  # wall clock in the table's zone, as Flink
    if delta % timedelta(days=1) == timedelta(0):
        moment = schedule_time.astimezone(tz).replace(tzinfo=None) - delta
    else:
        # In UTC: arithmetic on a datetime aware in a DST zone would be wall-clock arithmetic.
        moment = (schedule_time.astimezone(UTC) - delta).astimezone(tz).replace(tzinfo=None)
    return {
        col: (
            f if isinstance(f, DateFormatter) else DateFormatter(f, f"partition-fields.{col}.date-formatter")
        ).format(moment)
        for col, f in formatters.items()
    }


# --- the query ----------------------------------------------------------------------------------

# One token at a time: quoted strings, backticked identifiers and comments are skipped as a whole,
# so a ';' or a table name inside them does not count.
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line_comment>--[^\n]*)
  | (?P<block_comment>/\*.*?\*/)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<ident>`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)
  | (?P<dot>\.)
  | (?P<semicolon>;)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_QUERY_STARTS = {"SELECT", "WITH", "FROM", "VALUES", "TABLE"}
QUERY_RULE = "one Spark SQL query (SELECT ..., WITH ... SELECT ...), no other statement"


def _tokens(query: str) -> list[tuple[str, str]]:
    out = []
    for m in _TOKEN.finditer(query):
        kind = m.lastgroup or "other"
        if kind in ("ws", "line_comment", "block_comment"):
            continue
        out.append((kind, m.group()))
    return out


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def check_query(query: str, field: str = "query") -> str:
    """``query`` without a trailing ``;``, if it is one SELECT/WITH query; else an error naming the field."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidDeclaration(f"{field}: must be {QUERY_RULE}, got {query!r}")
    check_no_nul(query, field)
    if "/*" in query and not re.search(r"/\*.*?\*/", query, re.DOTALL):
        raise InvalidDeclaration(f"{field}: has an unterminated /* comment")
    tokens = _tokens(query)
    semis = [i for i, (kind, _) in enumerate(tokens) if kind == "semicolon"]
    if any(i != len(tokens) - 1 for i in semis):
        raise InvalidDeclaration(
            f"{field}: holds more than one statement (';' before the end); allowed: {QUERY_RULE}"
        )
    first = next((t for kind, t in tokens if kind != "other" or t != "("), "")
    if first.upper() not in _QUERY_STARTS:
        raise InvalidDeclaration(f"{field}: must be {QUERY_RULE}; it starts with {first!r}")
    if any(kind == "other" and t in ("'", '"', "`") for kind, t in tokens):
        raise InvalidDeclaration(f"{field}: has an unterminated quote")
    text = query.strip()
    return text[:-1].rstrip() if semis else text


def referenced_tables(query: str, candidates: Collection[str]) -> set[str]:
    """The ``candidates`` (table ids ``cat.ns.name``) that ``query`` names as a whole dotted
    identifier (backticks allowed, case-insensitive as Spark's identifiers). A cheap textual check:
    a table named without its catalog (``ns.name``) is not found; Spark's analysis at creation
    records the exact source tables."""
    wanted = {c.lower(): c for c in candidates}
    if not wanted:
        return set()
    names = (".".join(parts) for parts in _dotted_names(query))
    return {wanted[name.lower()] for name in names if name.lower() in wanted}


def _dotted_names(query: str) -> Iterator[tuple[str, ...]]:
    """The parts of each whole dotted identifier of the query (``a.b.c``, backticks removed), as written."""
    tokens = _tokens(query)
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "ident" or (i > 0 and tokens[i - 1][0] == "dot"):
            i += 1
            continue
        parts = [_unquote(tokens[i][1])]
        j = i + 1
        while j + 1 < len(tokens) and tokens[j][0] == "dot" and tokens[j + 1][0] == "ident":
            parts.append(_unquote(tokens[j + 1][1]))
            j += 2
        yield tuple(parts)
        i = j


def named_tables(query: str) -> set[str]:
    """Every ``catalog.namespace.table`` the query names (a whole three-part dotted identifier,
    backticks removed), as written. Textual: it also finds a three-part column reference."""
    return {".".join(parts) for parts in _dotted_names(query) if len(parts) == 3}


def find_cycle(edges: Mapping[str, Collection[str]]) -> list[str] | None:
    """A cycle of ``edges`` (node -> the nodes it depends on) as a path ``[a, b, a]``, or None.
    Deterministic: nodes are visited in sorted order."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle is not None:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            cycle = visit(start)
            if cycle is not None:
                return cycle
    return None


# --- the definition -----------------------------------------------------------------------------


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
    refresh DAG takes (owner, queue, priority, retries, retry-delay, suspend-after-failures).

    ``schema`` (attribute ``columns``) and ``source-tables`` are filled at creation by Spark's
    analysis of the query, never at parse.
    """

    catalog: str
    namespace: str
    name: str
    query: str = Field(description="one Spark SQL SELECT (or WITH ... SELECT) statement")
    freshness: FreshnessField
    refresh_mode: RefreshMode = RefreshMode.FULL
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
            if not isinstance(ident, str) or ident.count(".") != 2:
                raise ValueError(f"identifier: {ident!r} must be written catalog.namespace.name")
            data["catalog"], data["namespace"], data["name"] = ident.split(".")
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

    @field_validator("catalog", "namespace", "name")
    @classmethod
    def _ident(cls, v: str, info: Any) -> str:
        return validate_identifier(v, info.field_name)

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
        if isinstance(v, str) and v.strip().lower() == RefreshMode.FULL:
            return RefreshMode.FULL
        raise ValueError(
            f"{v!r} is not supported: Spark batch refreshes are full; allowed: "
            f"{', '.join(m.value for m in RefreshMode)}"
        )

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


__all__ = [
    "Column",
    "DateFormatter",
    "DynamicState",
    "DynamicTableSpec",
    "PartitionField",
    "RefreshAction",
    "RefreshMode",
    "RefreshTrigger",
    "check_query",
    "downstream_problem",
    "find_cycle",
    "parse_dynamic_table",
    "partition_values",
    "named_tables",
    "referenced_tables",
]
