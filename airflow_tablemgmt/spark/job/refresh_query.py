"""The refresh job's options and its query: validated options (:class:`RefreshJob`), the analysed
query under the query policy, its schema, sources and partition fields, partition values bound as typed
literals, and schema drift. The modes that write are ``refresh.py``'s.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.dynamic.incremental import AUTO, INCREMENTAL
from airflow_tablemgmt.core.dynamic.incremental import FULL as FULL_MODE
from airflow_tablemgmt.core.identifiers import quote, validate_identifier
from airflow_tablemgmt.core.query_policy import TIMEOUT_OPTION, parse_timeout, session_option_refusal
from airflow_tablemgmt.spark.errors import InvalidJobSpec, InvalidQuery
from airflow_tablemgmt.spark.job import literals, query_policy
from airflow_tablemgmt.spark.protocol import describe_exception

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructField

log = logging.getLogger(__name__)

MODES = ("analyse", "create", "refresh", "drop")
REFRESH_MODES = (AUTO, FULL_MODE, INCREMENTAL)
# dynamic_options keys with this prefix are session settings for the one refresh; the others are
# Iceberg write options of its overwrite (``write-format``, ``target-file-size-bytes``, ...).
SESSION_PREFIX = "spark.sql."
FULL = "FULL"
PARTITION = "PARTITION"
QUERY_ALIAS = "tms_query"
# Partition columns a value can be bound to (Spark type names); others are refreshed whole only.
VALUE_TYPES = ("string", "date", "tinyint", "smallint", "int", "bigint")
_VARCHAR = re.compile(r"^(var)?char\(\d+\)$")
_VARCHAR_ANYWHERE = re.compile(r"\b(var)?char\(\d+\)")
_NARROW_INT = re.compile(r"\b(tinyint|smallint)\b")


@dataclass(frozen=True)
class RefreshJob:
    """The job's options, validated (``options`` is built by the dynamic-tables factory)."""

    mode: str
    query: str
    partitioned_by: tuple[str, ...]
    partition_values: dict[str, str]
    expected_schema: list[dict[str, Any]] | None
    recreate: bool
    source_tables: tuple[str, ...]
    dynamic_options: dict[str, str]
    # The job's wall clock in seconds (``timeout_seconds``; None: no limit): ``spark/job/wall_clock.py``.
    timeout_seconds: float | None = None
    # The table's declared refresh-mode (AUTO, FULL, INCREMENTAL): ``refresh_plan.refresh_mode``.
    refresh_mode: str = "AUTO"
    # What the last successful refresh left (``core.dynamic.incremental_decision.Previous``), or None.
    previous: dict[str, Any] | None = None

    @property
    def write_options(self) -> dict[str, str]:
        return {k: v for k, v in self.dynamic_options.items() if not k.startswith(SESSION_PREFIX)}

    @property
    def session_options(self) -> dict[str, str]:
        return {k: v for k, v in self.dynamic_options.items() if k.startswith(SESSION_PREFIX)}


def parse_options(options: dict[str, Any]) -> RefreshJob:
    """Validate the options; errors name the option and what it allows."""
    mode = options.get("mode", "refresh")
    if mode not in MODES:
        raise InvalidJobSpec(f"refresh.mode: {mode!r} is not a mode; allowed: {', '.join(MODES)}")
    query = options.get("query")
    if mode == "drop" and not query:
        query = ""
    elif not isinstance(query, str) or not query.strip():
        raise InvalidJobSpec("refresh.query: a Spark SQL SELECT statement is required")
    query = query.strip()
    # One trailing ';' is a habit, not a second statement.
    query = query[:-1].rstrip() if query.endswith(";") else query
    partitioned_by = options.get("partitioned_by") or []
    if not isinstance(partitioned_by, list) or not all(isinstance(c, str) for c in partitioned_by):
        raise InvalidJobSpec(
            f"refresh.partitioned_by: expected a list of column names, got {partitioned_by!r}"
        )
    for column in partitioned_by:
        validate_identifier(column, "partitioned-by")
    values = options.get("partition_values") or {}
    if not isinstance(values, dict):
        raise InvalidJobSpec(f"refresh.partition_values: expected {{column: value}}, got {values!r}")
    by_lower = {c.lower(): c for c in partitioned_by}
    unknown = [k for k in values if str(k).lower() not in by_lower]
    if unknown:
        keys = ", ".join(partitioned_by) if partitioned_by else "none (the table is not partitioned)"
        raise InvalidJobSpec(
            f"refresh.partition_values: unknown partition key(s) {', '.join(map(repr, unknown))}; "
            f"partition keys: {keys}"
        )
    bad = {k: v for k, v in values.items() if not isinstance(v, (str, int)) or isinstance(v, bool)}
    if bad:
        raise InvalidJobSpec(f"refresh.partition_values: values must be strings, got {bad!r}")
    expected = options.get("expected_schema")
    if expected is not None and (
        not isinstance(expected, list)
        or not all(isinstance(f, dict) and "name" in f and "type" in f for f in expected)
    ):
        raise InvalidJobSpec(
            'refresh.expected_schema: expected [{"name", "type", "nullable"}, ...] or null, '
            f"got {expected!r}"
        )
    recreate = options.get("recreate", False)
    if not isinstance(recreate, bool):
        raise InvalidJobSpec(f"refresh.recreate: expected true or false, got {recreate!r}")
    sources = options.get("source_tables") or []
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise InvalidJobSpec(f"refresh.source_tables: expected a list of table ids, got {sources!r}")
    dynamic = options.get("dynamic_options") or {}
    if not isinstance(dynamic, dict):
        raise InvalidJobSpec(f"refresh.dynamic_options: expected {{option: value}}, got {dynamic!r}")
    for key, value in dynamic.items():
        if not isinstance(key, str) or not isinstance(value, (str, int, float, bool)):
            raise InvalidJobSpec(
                f"refresh.dynamic_options.{key}: must be a string, number or boolean, got {value!r}"
            )
        if refusal := session_option_refusal(key, "refresh.dynamic_options"):
            raise InvalidJobSpec(refusal)
    refresh_mode = str(options.get("refresh_mode") or "AUTO").upper()
    if refresh_mode not in REFRESH_MODES:
        raise InvalidJobSpec(
            f"refresh.refresh_mode: {options.get('refresh_mode')!r} is not a refresh mode; allowed: "
            f"{', '.join(REFRESH_MODES)}"
        )
    previous = options.get("previous")
    if previous is not None and not isinstance(previous, dict):
        raise InvalidJobSpec(
            f"refresh.previous: expected the last refresh's snapshots or null, got {previous!r}"
        )
    try:
        timeout = parse_timeout(options.get(TIMEOUT_OPTION), f"refresh.{TIMEOUT_OPTION}")
    except ValueError as e:
        raise InvalidJobSpec(str(e)) from None
    return RefreshJob(
        mode=mode,
        query=query,
        partitioned_by=tuple(partitioned_by),
        partition_values={by_lower[str(k).lower()]: str(v) for k, v in values.items()},
        expected_schema=expected,
        recreate=recreate,
        source_tables=tuple(sources),
        dynamic_options={k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in dynamic.items()},
        timeout_seconds=timeout,
        refresh_mode=refresh_mode,
        previous=previous,
    )


# -- analysis -------------------------------------------------------------------------------------


def wrapped(query: str, condition: str | None = None) -> str:
    where = f" WHERE {condition}" if condition else ""
    return f"SELECT * FROM ({query}) AS {QUERY_ALIAS}{where}"


def query_frame(
    spark: SparkSession, query: str, condition: str | None = None, *, catalogs: frozenset[str]
) -> DataFrame:
    """The analysed query (nothing runs yet), checked by ``query_policy`` against ``catalogs``. A query
    that is not one SELECT fails as InvalidQuery; one the policy refuses as QueryNotAllowed."""
    query_policy.check_statement(spark, query, catalogs)
    parsed = query_policy.parse_query(spark, query)
    try:
        df = spark.sql(wrapped(query, condition))
    except Exception as e:
        if type(e).__name__ not in ("AnalysisException", "ParseException"):
            raise
        _, message = describe_exception(e)
        if type(e).__name__ == "ParseException" and parsed is not None:
            # It parses alone but not as a subquery: a command (DROP, INSERT, SET ...), not a SELECT.
            raise InvalidQuery(
                f"query: must be one Spark SQL SELECT (or WITH ... SELECT) statement; Spark reads it as "
                f"{parsed} ({message.splitlines()[0]})"
            ) from None
        raise InvalidQuery(f"query: {message}") from None
    query_policy.check_plan(df, catalogs)
    return df


def schema_of(df: DataFrame) -> list[dict[str, Any]]:
    return [
        {"name": f.name, "type": f.dataType.simpleString(), "nullable": f.nullable} for f in df.schema.fields
    ]


def source_tables_of(df: DataFrame) -> list[str]:
    """The tables the analysed plan reads (views, CTEs and subqueries included), as ``cat.ns.name``."""
    found: set[str] = set()
    pending = [df._jdf.queryExecution().analyzed()]
    while pending:
        node = pending.pop()
        if node.getClass().getSimpleName() == "DataSourceV2Relation":
            catalog, ident = node.catalog(), node.identifier()
            if catalog.isDefined() and ident.isDefined():
                parts = [catalog.get().name(), *list(ident.get().namespace()), ident.get().name()]
                found.add(".".join(str(p) for p in parts))
            else:
                found.add(str(node.table().name()))
        for seq in (node.children(), node.subqueries()):
            pending.extend(seq.apply(i) for i in range(seq.size()))
    return sorted(found)


def partition_fields(df: DataFrame, partitioned_by: tuple[str, ...]) -> list[StructField]:
    """The query's fields for the partition columns; a column it does not produce is named."""
    by_lower = {f.name.lower(): f for f in df.schema.fields}
    out = []
    for column in partitioned_by:
        field = by_lower.get(column.lower())
        if field is None:
            raise InvalidQuery(
                f"partitioned-by: column {column!r} is not produced by the query; "
                f"its columns: {', '.join(f.name for f in df.schema.fields)}"
            )
        out.append(field)
    return out


# -- literals and drift ---------------------------------------------------------------------------


def partition_condition(
    spark: SparkSession, fields: list[StructField], values: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """``(`a` = CAST('v' AS type) AND …, {column: value as Spark reads it})`` for ``values``.

    The value goes in as a string literal and is cast to the column's type by Spark; one that does
    not cast is an error (Spark would compare with NULL, match nothing and overwrite nothing).
    """
    by_lower = {f.name.lower(): f for f in fields}
    clauses, casts = [], []
    for column, value in values.items():
        field = by_lower[column.lower()]
        type_name = field.dataType.simpleString()
        if type_name not in VALUE_TYPES and not _VARCHAR.match(type_name):
            raise InvalidJobSpec(
                f"partition_values: column {field.name!r} has type {type_name}; a partition refreshed by "
                f"value must be one of {', '.join(VALUE_TYPES)}"
            )
        literal = f"CAST({literals.string(value)} AS {type_name.upper()})"
        clauses.append(f"{quote(field.name)} = {literal}")
        casts.append((field.name, value, type_name, literal))
    row = spark.sql("SELECT " + ", ".join(f"{lit} AS c{i}" for i, (*_, lit) in enumerate(casts))).first()
    assert row is not None  # a SELECT of literals has one row
    canonical = {}
    for i, (name, value, type_name, _) in enumerate(casts):
        cast = row[f"c{i}"]
        if cast is None:
            raise InvalidJobSpec(
                f"partition_values: {value!r} is not a valid {type_name} for column {name!r}"
            )
        canonical[name] = str(cast)
    return " AND ".join(clauses), canonical


def _normal_type(type_name: str) -> str:
    # What a column reads back as from Iceberg, which has no byte/short/char/varchar types (nested too).
    return _NARROW_INT.sub("int", _VARCHAR_ANYWHERE.sub("string", type_name))


def schema_drift(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> list[str]:
    """What changed from ``expected`` to ``actual`` (names case-insensitive, types as Iceberg keeps them)."""
    old = {str(f["name"]).lower(): (str(f["name"]), _normal_type(str(f["type"]))) for f in expected}
    new = {str(f["name"]).lower(): (str(f["name"]), _normal_type(str(f["type"]))) for f in actual}
    changes = [f"column {new[k][0]!r} added ({new[k][1]})" for k in new if k not in old]
    changes += [f"column {old[k][0]!r} removed" for k in old if k not in new]
    changes += [
        f"column {new[k][0]!r}: {old[k][1]} -> {new[k][1]}"
        for k in new
        if k in old and old[k][1] != new[k][1]
    ]
    # A new column order is no drift: the overwrite matches columns by name.
    return changes
