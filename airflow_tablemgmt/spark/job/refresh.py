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

``timeout_seconds`` (set by the DAG from the task's ``execution_timeout``) is the job's wall clock: at
the limit its Spark jobs are cancelled and it fails naming the limit (``wall_clock.py``); a creation
stopped there still drops the table it created.

Refresh modes (issue 41): every mode walks the analysed plan once more (``refresh_plan.py``) and decides
with ``core.dynamic.incremental`` whether the query could be maintained incrementally. A declared
``INCREMENTAL`` the query cannot have fails the job naming the construct — in ``analyse`` and ``create``
before anything is created. A refresh of the whole table of such a query (``AUTO`` or ``INCREMENTAL``)
first tries ``incremental_refresh.attempt`` (the change since ``previous``, the last refresh's snapshots,
in one commit: ``refresh_action`` and ``refresh_mode`` ``INCREMENTAL``); when it cannot, the summary says
why and the refresh is FULL as above, reading every source at the snapshot it records (so the next refresh
starts there: ``incremental_base``) and rebuilding the state table of a query with ``avg``
(``state_snapshot_id``). A creation, a recreation and a partition refresh are FULL, saying so.

Schema drift — the query's columns (names, types as Iceberg keeps them; order and nullability aside)
differ from the table's — fails the refresh unless ``recreate``, which replaces the table in one commit
(``DataFrameWriterV2.createOrReplace``, Iceberg's atomic replace) with what this refresh writes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.dynamic.incremental import FULL as FULL_MODE
from airflow_tablemgmt.core.dynamic.incremental import ModePlan
from airflow_tablemgmt.core.dynamic.incremental_decision import Previous
from airflow_tablemgmt.core.errors import InvalidDeclaration, TableNotFound
from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.core.query_policy import FORCED_SESSION
from airflow_tablemgmt.spark.errors import SchemaDrift, TableExists
from airflow_tablemgmt.spark.job import (
    incremental_refresh,
    incremental_state,
    lease_guard,
    literals,
    query_policy,
    refresh_plan,
    wall_clock,
)
from airflow_tablemgmt.spark.job.metrics import FirstRead, metadata_table, snapshot_summary
from airflow_tablemgmt.spark.job.refresh_query import (
    FULL,
    PARTITION,
    RefreshJob,
    parse_options,
    partition_condition,
    partition_fields,
    query_frame,
    schema_drift,
    schema_of,
    source_tables_of,
    wrapped,
)
from airflow_tablemgmt.spark.protocol import describe_exception, timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Set by ``create``: 'creating' from its CREATE until its first refresh committed, then 'created'. A
# create that finds its own 'creating' leftover (a job killed in between) replaces it; any other table
# with the name is an error.
CREATION_PROPERTY = "tablemgmt.dynamic-table"
# Why a creation's and a recreation's refresh is FULL whatever the mode: there is nothing to maintain yet.
NO_PREVIOUS_STATE = "no previous state: the table's first refresh computes the whole query"
RECREATED = "the table is recreated from its query: no previous state to maintain"
# The partitions_written list of a full refresh is cut here (the count is always exact).
MAX_PARTITIONS_LISTED = 1000


def analyse(spark: SparkSession, table: TableIdentifier, options: dict[str, Any]) -> dict[str, Any]:
    job = parse_options({**options, "mode": "analyse"})
    df = query_frame(spark, job.query, catalogs=frozenset({table.catalog}))
    partition_fields(df, job.partitioned_by)
    analysis, mode = refresh_plan.refresh_mode(df, job.refresh_mode, str(table))
    return {
        "schema": schema_of(df),
        "source_tables": source_tables_of(df),
        "incremental": analysis.to_dict(),
        "refresh_mode": mode.mode,
        "refresh_mode_reason": mode.reason,
    }


# -- writes ---------------------------------------------------------------------------------------


def current_snapshot(spark: SparkSession, table_id: str) -> int | None:
    """The table's ``main`` snapshot: from Iceberg's table API in the driver (no Spark job); a table that
    API cannot load is asked through its ``refs`` metadata table, whose error says why."""
    table = TableIdentifier.parse(table_id)
    try:
        return incremental_state.current(spark, table)
    except Exception:  # noqa: BLE001, S110 - the metadata table's query below answers, or raises the reason
        pass
    row = spark.sql(f"SELECT snapshot_id FROM {metadata_table(table, 'refs')} WHERE name = 'main'").first()
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

    with timed("refresh_analyse"):  # the query parsed, checked and analysed, its plan walked (driver only)
        df = query_frame(spark, job.query, catalogs=frozenset({table.catalog}))
        fields = partition_fields(df, job.partitioned_by)
        schema = schema_of(df)
        analysis, mode = refresh_plan.refresh_mode(df, job.refresh_mode, str(table))
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
    with timed("refresh_snapshots"):
        snapshots = source_snapshots(spark, sources)  # before the query reads them
        before = current_snapshot(spark, str(table))
    action = PARTITION if condition else FULL
    maintained = analysis.incremental and job.refresh_mode != FULL_MODE
    shape: Any = None
    if maintained and not created and not recreate and not condition:
        tried = incremental_refresh.attempt(
            spark,
            table,
            declared=job.refresh_mode,
            df=df,
            analysis=analysis,
            snapshots=snapshots,
            previous=Previous.from_dict(job.previous),
            partitioned_by=job.partitioned_by,
            write_options=job.write_options,
        )
        if tried.summary is not None:
            return incremental_refresh.summary(
                tried, analysis, snapshots, schema, sources, job.dynamic_options
            )
        mode, shape = tried.mode, tried.shape
    elif maintained and condition:
        mode = ModePlan(FULL_MODE, incremental_refresh.PARTITION_REFRESH)
    rows_df = (
        query_frame(spark, job.query, condition, catalogs=frozenset({table.catalog})) if condition else df
    )
    pinned = False
    if analysis.incremental:  # read what is recorded, so that the next refresh starts where this one stops
        try:
            rows_df, pinned = incremental_refresh.pinned_frame(spark, rows_df, snapshots), True
        except Exception:  # noqa: BLE001 - the refresh still runs in full; the next one is FULL too
            log.warning(
                "%s: could not pin the sources' snapshots; reading them as they are", table, exc_info=True
            )
    writer = rows_df.writeTo(str(table)).options(**job.write_options)
    lease_guard.fence(f"the refresh's write to {table}")  # the final write: only with a confirmed lease
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
    if created:
        mode = ModePlan(FULL_MODE, NO_PREVIOUS_STATE)
    elif recreate:
        mode = ModePlan(FULL_MODE, RECREATED)
    snapshot_id, rows = _written(spark, table, before)
    state_snapshot = None
    if maintained and pinned and not condition:
        if shape is None:
            found = incremental_refresh.shape_of(df, analysis)
            shape = None if isinstance(found, str) else found
        if shape is not None:
            state_snapshot = incremental_refresh.rebuild_state(spark, table, shape, rows_df)
    partitions = [written_values] if condition else _all_partitions(spark, table, job.partitioned_by)
    log.info("%s refresh of %s wrote %d rows in snapshot %s", action, table, rows, snapshot_id)
    return {
        "refresh_action": action,
        "refresh_mode": mode.mode,
        "refresh_mode_reason": mode.reason,
        "incremental": analysis.to_dict(),
        "source_snapshots": snapshots,
        "partitions_written": partitions[:MAX_PARTITIONS_LISTED],
        "partitions_written_count": len(partitions),
        "rows_written": rows,
        "snapshot_id": snapshot_id,
        # The whole table is the query at source_snapshots: the next refresh may add the change since.
        "incremental_base": pinned and not condition,
        "state_snapshot_id": state_snapshot,
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
    refresh_plan.refresh_mode(df, job.refresh_mode, str(table))  # INCREMENTAL refused before anything is made
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
        wall_clock.release()  # a creation stopped at its limit still drops what it created
        try:
            spark.sql(f"DROP TABLE IF EXISTS {table.quoted} PURGE")
        except Exception:  # noqa: BLE001 - the refresh's own error is the one to report
            log.exception("could not drop %s after its failed creation", table)
        raise


def drop(spark: SparkSession, table: TableIdentifier) -> dict[str, Any]:
    """``drop --purge``: the table and its files. A table already gone is not an error (a retry)."""
    existed = bool(spark.catalog.tableExists(str(table)))
    spark.sql(f"DROP TABLE IF EXISTS {table.quoted} PURGE")
    incremental_state.drop(spark, table)  # the state an incremental refresh kept beside it
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
    # User SQL runs below: Spark's failure text goes to the log only (QueryFailed to the process row);
    # its Spark jobs stop at the job's wall clock (QueryTimedOut naming the limit).
    clock = wall_clock.WallClock(_context(spark), job.timeout_seconds, job.mode)
    with session_settings(spark, settings), clock, query_policy.sanitized_failure(log):
        if job.mode == "analyse":
            return analyse(spark, table, options)
        if job.mode == "create":
            return create(spark, table, job)
        if not spark.catalog.tableExists(str(table)):
            raise TableNotFound(f"table {table} does not exist; a dynamic table is made by its create job")
        return overwrite(spark, table, job, created=False)


def _context(spark: SparkSession) -> Any:
    """The classic session's SparkContext; None on Spark Connect (which runs no refresh)."""
    from airflow_tablemgmt.spark.connect.policy import is_remote

    return None if is_remote(spark) else spark.sparkContext


# job_main.run skips its table-exists check: the ``create`` mode makes the table.
refresh.may_create_table = True  # type: ignore[attr-defined]
