"""A dynamic table's Spark job (action ``refresh``): analyse its query, create it, or refresh it.

``options["mode"]`` picks one of three:

- ``analyse``: Spark analyses the query (nothing runs, nothing is created) and returns its
  ``schema`` and ``source_tables`` (every table of the analysed plan, subqueries and CTEs included).
  A query that does not parse or resolve fails naming the problem; a ``partitioned_by`` column the
  query does not produce fails naming the column and the query's columns.
- ``create``: analyse, ``CREATE TABLE … USING iceberg PARTITIONED BY (<identity columns>) AS SELECT *
  FROM (<query>) LIMIT 0`` (the schema is the query's; Spark makes every column nullable), then the
  first refresh. If anything after the ``CREATE`` fails, the table it created is dropped (``PURGE``):
  a failed creation leaves nothing behind. A table that already exists is an error, never replaced —
  except the leftover of this job killed between its ``CREATE`` and its first commit (table property
  ``tablemgmt.dynamic-table = creating``), which a retry drops and creates again.
- ``refresh``: read the current snapshot of every source table, then overwrite. With
  ``partition_values`` (``{column: value}``) exactly the partitions matching them are replaced by the
  query's rows for them — ``INSERT OVERWRITE`` by filter, ``SELECT * FROM (<query>) WHERE col = <value>``
  — and every other partition keeps its files; without, the whole table is replaced in one commit.
- ``drop`` (``drop --purge``): ``DROP TABLE IF EXISTS … PURGE``; a table already gone is not an error.

``dynamic_options`` (Flink's dynamic options of a refresh, ``RESUME WITH``): keys starting with
``spark.sql.`` are set on the session for this one job and restored after it; the others are Iceberg
write options of its overwrite (``write-format``, ``target-file-size-bytes``, ``distribution-mode`` …).

The overwrite is Spark's ``OverwriteByExpression`` (``DataFrameWriterV2.overwrite(condition)``) with
the filter written out, so it does not depend on ``spark.sql.sources.partitionOverwriteMode``: a
partition the query now yields no rows for is emptied, not left stale (a *dynamic* ``INSERT OVERWRITE``
would keep it), and a filter on some of several partition columns replaces all partitions under it.
Values are bound as literals of the column's type: ``CAST(<string literal> AS <type>)``; a value that
does not cast (Spark would yield NULL and match nothing) is an error naming the column, the value and
the type. Identifiers are validated and quoted (``core.identifiers``).

The query runs wrapped as ``SELECT * FROM (<query>) AS q``, so a second statement or a command
(``DROP …``) can only be a parse error, never executed.

Source snapshot ids are read *before* the query runs: a commit to a source between the read and the
scan can only make the next NO_DATA check see a newer snapshot and refresh once more, never skip data.
Schema drift — the query's columns (names, types as Iceberg keeps them; order and nullability aside)
differ from the table's — fails the refresh unless ``recreate``, which replaces the table in one commit
(``DataFrameWriterV2.createOrReplace``, Iceberg's atomic replace) with what this refresh writes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import InvalidDeclaration, TableMgmtError, TableNotFound
from airflow_tablemgmt.core.identifiers import TableIdentifier, quote, validate_identifier
from airflow_tablemgmt.core.query_policy import FORCED_SESSION, session_option_refusal
from airflow_tablemgmt.spark.errors import InvalidJobSpec
from airflow_tablemgmt.spark.job import literals, query_policy
from airflow_tablemgmt.spark.job.metrics import FirstRead, metadata_table, snapshot_summary
from airflow_tablemgmt.spark.protocol import describe_exception

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructField

log = logging.getLogger(__name__)

MODES = ("analyse", "create", "refresh", "drop")
# dynamic_options keys with this prefix are session settings for the one refresh; the others are
# Iceberg write options of its overwrite (``write-format``, ``target-file-size-bytes``, ...).
SESSION_PREFIX = "spark.sql."
FULL = "FULL"
PARTITION = "PARTITION"
QUERY_ALIAS = "tms_query"
# Partition columns a value can be bound to (Spark type names); others are refreshed whole only.
VALUE_TYPES = ("string", "date", "tinyint", "smallint", "int", "bigint")
# Set by ``create``: 'creating' from its CREATE until its first refresh committed, then 'created'. A
# create that finds its own 'creating' leftover (a job killed in between) replaces it; any other table
# with the name is an error.
CREATION_PROPERTY = "tablemgmt.dynamic-table"
# The partitions_written list of a full refresh is cut here (the count is always exact).
MAX_PARTITIONS_LISTED = 1000
_VARCHAR = re.compile(r"^(var)?char\(\d+\)$")
_VARCHAR_ANYWHERE = re.compile(r"\b(var)?char\(\d+\)")
_NARROW_INT = re.compile(r"\b(tinyint|smallint)\b")


InvalidQuery = query_policy.InvalidQuery  # raised by this module too; QueryNotAllowed is one


class SchemaDrift(TableMgmtError):
    """The query's schema is no longer the table's; only a refresh with ``recreate`` may replace it."""


class TableExists(TableMgmtError):
    """``create`` found the table already there; it never replaces a table it did not create."""


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
    return RefreshJob(
        mode=mode,
        query=query,
        partitioned_by=tuple(partitioned_by),
        partition_values={by_lower[str(k).lower()]: str(v) for k, v in values.items()},
        expected_schema=expected,
        recreate=recreate,
        source_tables=tuple(sources),
        dynamic_options={k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in dynamic.items()},
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


def analyse(spark: SparkSession, table: TableIdentifier, options: dict[str, Any]) -> dict[str, Any]:
    job = parse_options({**options, "mode": "analyse"})
    df = query_frame(spark, job.query, catalogs=frozenset({table.catalog}))
    partition_fields(df, job.partitioned_by)
    return {"schema": schema_of(df), "source_tables": source_tables_of(df)}


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


# -- writes ---------------------------------------------------------------------------------------


def current_snapshot(spark: SparkSession, table_id: str) -> int | None:
    row = spark.sql(
        f"SELECT snapshot_id FROM {metadata_table(TableIdentifier.parse(table_id), 'refs')} WHERE name = 'main'"
    ).first()
    return None if row is None else int(row["snapshot_id"])


def source_snapshots(spark: SparkSession, sources: list[str]) -> dict[str, int | None]:
    """The current (``main``) snapshot of each source; None for a table without one.

    A source whose snapshot cannot be read (not ``catalog.namespace.table``, not an Iceberg table) is
    recorded as None with a warning: the NO_DATA check cannot read it either and so always refreshes.
    """
    out: dict[str, int | None] = {}
    for source in sources:
        try:
            out[source] = current_snapshot(spark, source)
        except Exception as e:
            if not isinstance(e, InvalidDeclaration) and type(e).__name__ != "AnalysisException":
                raise
            log.warning("source %s: no Iceberg snapshot to record (%s)", source, describe_exception(e)[1])
            out[source] = None
    return out


def _create_statement(table: TableIdentifier, partitioned_by: tuple[str, ...]) -> str:
    parts = f" PARTITIONED BY ({', '.join(quote(c) for c in partitioned_by)})" if partitioned_by else ""
    props = f" TBLPROPERTIES ({literals.string(CREATION_PROPERTY)} = 'creating')"
    return f"CREATE TABLE {table.quoted} USING iceberg{parts}{props} AS "


def _creation_state(spark: SparkSession, table: TableIdentifier) -> str | None:
    rows = spark.sql(f"SHOW TBLPROPERTIES {table.quoted} ({literals.string(CREATION_PROPERTY)})").collect()
    value = rows[0]["value"] if rows else None
    return value if value in ("creating", "created") else None


def _written(spark: SparkSession, table: TableIdentifier, before: int | None) -> tuple[int | None, int]:
    after = current_snapshot(spark, str(table))
    if after is None or after == before:
        return after, 0
    return after, int(snapshot_summary(spark, table, after).get("added-records") or 0)


def _all_partitions(
    spark: SparkSession, table: TableIdentifier, columns: tuple[str, ...]
) -> list[dict[str, Any]]:
    if not columns:
        return []
    rows = spark.sql(f"SELECT `partition` FROM {metadata_table(table, 'partitions')}").collect()
    out = []
    for row in rows:
        part = row["partition"].asDict()
        out.append({c: None if part.get(c) is None else str(part[c]) for c in columns})
    return sorted(out, key=lambda p: [str(v) for v in p.values()])


def overwrite(
    spark: SparkSession, table: TableIdentifier, job: RefreshJob, *, created: bool
) -> dict[str, Any]:
    """The refresh proper: snapshots of the sources, then one overwrite commit."""
    from pyspark.sql import functions as F

    df = query_frame(spark, job.query, catalogs=frozenset({table.catalog}))
    fields = partition_fields(df, job.partitioned_by)
    schema = schema_of(df)
    sources = source_tables_of(df)  # the plan's, not the declaration's: an altered query may read others
    # The table is what the rows go into: its schema is the reference. The stored one (expected_schema)
    # only explains a difference the table does not have (the table was replaced meanwhile).
    drift = schema_drift(schema_of(spark.table(table.quoted)), schema)
    if job.expected_schema is not None and not drift and schema_drift(job.expected_schema, schema):
        log.warning("%s: the stored schema differs from the query's, the table's does not", table)
    recreate = bool(drift) and not created
    if recreate and not job.recreate:
        raise SchemaDrift(
            f"query: its schema no longer matches table {table}: {'; '.join(drift)}; "
            "refresh with recreate to replace the table"
        )
    condition, written_values = (
        partition_condition(spark, fields, job.partition_values) if job.partition_values else (None, {})
    )
    snapshots = source_snapshots(spark, sources)  # before the query reads them
    before = current_snapshot(spark, str(table))
    action = PARTITION if condition else FULL
    rows_df = (
        query_frame(spark, job.query, condition, catalogs=frozenset({table.catalog})) if condition else df
    )
    writer = rows_df.writeTo(str(table)).options(**job.write_options)
    if recreate:
        log.warning("recreating %s: %s", table, "; ".join(drift))
        writer = writer.using("iceberg")
        if job.partitioned_by:
            writer = writer.partitionedBy(*(F.col(quote(c)) for c in job.partitioned_by))
        writer.createOrReplace()
    elif condition:
        log.info("overwriting the partitions of %s where %s", table, condition)
        writer.overwrite(F.expr(condition))
    else:
        log.info("overwriting all of %s", table)
        writer.overwrite(F.lit(True))
    snapshot_id, rows = _written(spark, table, before)
    partitions = [written_values] if condition else _all_partitions(spark, table, job.partitioned_by)
    log.info("%s refresh of %s wrote %d rows in snapshot %s", action, table, rows, snapshot_id)
    return {
        "refresh_action": action,
        "source_snapshots": snapshots,
        "partitions_written": partitions[:MAX_PARTITIONS_LISTED],
        "partitions_written_count": len(partitions),
        "rows_written": rows,
        "snapshot_id": snapshot_id,
        "recreated": recreate,
        "schema_changes": drift if recreate else [],
        "schema": schema,
        "source_tables": sources,
        "dynamic_options": dict(job.dynamic_options),
    }


def create(spark: SparkSession, table: TableIdentifier, job: RefreshJob) -> dict[str, Any]:
    """Create the table from the query, then refresh it; drop it again if anything fails."""
    df = query_frame(spark, job.query, catalogs=frozenset({table.catalog}))
    partition_fields(df, job.partitioned_by)
    if spark.catalog.tableExists(str(table)):
        if _creation_state(spark, table) != "creating":
            raise TableExists(
                f"table {table} already exists; a dynamic table is created only where there is none"
            )
        log.warning("%s is left from a creation that did not finish: dropping it to create it again", table)
        spark.sql(f"DROP TABLE {table.quoted} PURGE")
    sql = _create_statement(table, job.partitioned_by) + wrapped(job.query) + " LIMIT 0"
    log.info("creating %s: %s", table, sql)
    spark.sql(sql)
    try:
        summary = overwrite(spark, table, job, created=True)
        spark.sql(
            f"ALTER TABLE {table.quoted} SET TBLPROPERTIES ({literals.string(CREATION_PROPERTY)} = 'created')"
        )
        return {**summary, "created": True}
    except BaseException:
        log.warning("first refresh of %s failed: dropping the table it created", table)
        try:
            spark.sql(f"DROP TABLE IF EXISTS {table.quoted} PURGE")
        except Exception:  # noqa: BLE001 - the refresh's own error is the one to report
            log.exception("could not drop %s after its failed creation", table)
        raise


def drop(spark: SparkSession, table: TableIdentifier) -> dict[str, Any]:
    """``drop --purge``: the table and its files. A table already gone is not an error (a retry)."""
    existed = bool(spark.catalog.tableExists(str(table)))
    spark.sql(f"DROP TABLE IF EXISTS {table.quoted} PURGE")
    log.info("%s %s and purged its files", "dropped" if existed else "no table to drop:", table)
    return {"dropped": existed, "purged": True}


@contextmanager
def session_settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """``settings`` on the session for the block, the previous values (or none) back after it."""
    previous: dict[str, str | None] = {k: spark.conf.get(k, None) for k in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def refresh(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: FirstRead | None = None
) -> dict[str, Any]:
    """``MAINTAINERS["refresh"]``: analyse, create, refresh or drop the dynamic table ``table``.

    ``early`` is unused: a refresh may create its table, so the job reads nothing of it beforehand."""
    job = parse_options(options)
    if job.mode == "drop":
        return drop(spark, table)
    settings = {**job.session_options, **FORCED_SESSION}
    # User SQL runs below: Spark's failure text goes to the log only (QueryFailed to the process row).
    with session_settings(spark, settings), query_policy.sanitized_failure(log):
        if job.mode == "analyse":
            return analyse(spark, table, options)
        if job.mode == "create":
            return create(spark, table, job)
        if not spark.catalog.tableExists(str(table)):
            raise TableNotFound(f"table {table} does not exist; a dynamic table is made by its create job")
        return overwrite(spark, table, job, created=False)


# job_main.run skips its table-exists check: the ``create`` mode makes the table.
refresh.may_create_table = True  # type: ignore[attr-defined]
