"""What an incremental refresh writes, computed before its first commit (``incremental_refresh.attempt``).

* Filters, projections, joins (:func:`appended`): the change's new rows, appended; with rows a source's
  delete or overwrite removed (:func:`replaced`), the partitions the change touches (the whole table when not
  partitioned) rewritten as their rows plus the added ones ``EXCEPT ALL`` the removed ones (bag difference:
  a removed row takes away one copy of an equal row, as it took away one source row);
* ``GROUP BY`` / ``DISTINCT`` (:func:`grouped`): the change's partials (``incremental_merge.partials``,
  removed rows' subtracted) combined with the old partials of the partitions the change lands in.

The change is read here once, before anything is committed, so a read Iceberg refuses fails here and
``attempt`` refreshes in full, naming the failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.spark.job import incremental_merge, incremental_state, lease_guard
from airflow_tablemgmt.spark.job.incremental_plan import AggregateShape

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Not partitioned, with a state kept as a log: the state's small append and the table's write run side by
# side (each reads the change itself; the append is the change's partials only) instead of one after the other.
SIDE_BY_SIDE = True
# Not partitioned, with a state kept as a log, and appends only: when the old state and the appended rows
# together are at most this many rows, each write reads them in one Spark task (no shuffle: one stage per
# write), since at that size a stage's fixed cost is more than the work.
SINGLE_TASK_ROWS = 500_000
# The partitions_written list is cut here (the count is exact); past it a change touching more partitions
# rewrites the whole table.
MAX_PARTITIONS_LISTED = 1000


@dataclass
class Written:
    """What an incremental refresh writes: the table's rows (appended, or replacing the partitions they fall
    in when ``scoped``, else the whole table) and the state table's (None: no state); ``count`` the rows
    appended or the groups changed, ``partitions`` where."""

    table: DataFrame | None
    state: DataFrame | None
    count: int
    partitions: list[dict[str, Any]]
    append: bool = False
    scoped: bool = False
    # With removals: the rows of the table (and of the state table) the write replaces (the touched
    # partitions, or everything), since one of them may be left empty.
    where: Column | None = None
    state_where: Column | None = None
    removed: int = 0
    # With a state table: the table's rows from the state at the snapshot its write left (no second
    # combination of the change: a scan of the state's changed partitions, no shuffle).
    from_state: Callable[[int | None], DataFrame] | None = None
    # The changed groups, known once the state's write ran (not partitioned: the rows its append added, or
    # counted as its compaction runs).
    counted: Callable[[], int] | None = None
    # The state's rows are appended (a state kept as a log: ``incremental_merge``), not written over.
    state_append: bool = False
    # The state's append and the table's write run side by side (:func:`side_by_side`).
    side_by_side: bool = False


def appended(
    spark: SparkSession,
    table: TableIdentifier,
    rows: DataFrame,
    partitioned_by: tuple[str, ...],
    write_options: dict[str, str],
) -> Written:
    """Filters, projections, joins: the new rows, appended. Not partitioned, they are written as they are
    read (one Spark job; the count is the commit's own ``added-records``); partitioned, they are read once
    into the executors' memory for the partitions they fall in, then written."""
    if partitioned_by:
        kept = rows.localCheckpoint()
        count, partitions = counted(kept, partitioned_by)
        return Written(kept if count else None, None, count, partitions, append=True)
    before = incremental_state.current(spark, table)
    lease_guard.fence(f"the incremental refresh's write to {table}")
    rows.writeTo(str(table)).options(**write_options).append()
    return Written(None, None, incremental_state.added_records(spark, table, before), [], append=True)


def replaced(
    spark: SparkSession,
    table: TableIdentifier,
    added: DataFrame,
    removed: DataFrame,
    partitioned_by: tuple[str, ...],
) -> Written:
    """Filters, projections, joins with removed rows: the touched partitions' rows (the table's ``UNION ALL``
    the added rows ``EXCEPT ALL`` the removed ones) replace them. One Spark job here counts the change per
    partition; the write reads it again."""
    from pyspark.sql import functions as F

    parts = [F.col(quote(c)) for c in partitioned_by]
    flagged = added.select(*parts, F.lit(1).alias("tms_added"), F.lit(0).alias("tms_removed")).unionAll(
        removed.select(*parts, F.lit(0).alias("tms_added"), F.lit(1).alias("tms_removed"))
    )
    sums = [F.sum("tms_added").alias("tms_a"), F.sum("tms_removed").alias("tms_r")]
    texts = [F.col(quote(c)).cast("string").alias(f"tms_t{i}") for i, c in enumerate(partitioned_by)]
    found = (
        flagged.groupBy(*parts).agg(*sums, *texts).limit(MAX_PARTITIONS_LISTED + 1).collect()
        if partitioned_by
        else flagged.agg(*sums).collect()
    )
    count = sum(int(r["tms_a"] or 0) for r in found)
    gone = sum(int(r["tms_r"] or 0) for r in found)
    if not count and not gone:
        return Written(None, None, 0, [])
    old = spark.table(table.quoted)
    where = F.lit(True)
    partitions: list[dict[str, Any]] = []
    if partitioned_by and len(found) <= MAX_PARTITIONS_LISTED:
        partitions = sorted(
            ({c: r[f"tms_t{i}"] for i, c in enumerate(partitioned_by)} for r in found),
            key=lambda p: [str(v) for v in p.values()],
        )
        where = incremental_merge.where_partitions(
            partitioned_by, [[r[c] for c in partitioned_by] for r in found]
        )
        old = old.where(where)
    columns = [quote(c) for c in added.columns]
    rows = old.select(*columns).unionAll(added).exceptAll(removed)
    return Written(rows, None, count, partitions, where=where, removed=gone)


def grouped(
    spark: SparkSession,
    table: TableIdentifier,
    shape: AggregateShape,
    change: DataFrame,
    state: TableIdentifier | None,
    scope: tuple[int, ...] | None,
    partitioned_by: tuple[str, ...],
    write_options: dict[str, str],
    *,
    removes: bool = False,
    appended_rows: tuple[DataFrame, int] | None = None,
) -> Written:
    """GROUP BY / DISTINCT: the change's partials combined with the old ones (the state table's, or the
    table's own) of the partitions the change lands in (the whole table when it is not partitioned by keys
    only). One Spark job here reads the change for the groups and partitions it touches; the write combines
    again (the old state read at the snapshot it had before), which reads less than keeping the combined
    rows in the executors' memory would (a cached block read counts as read, at its size in memory, several
    times its size in Parquet). With a state table, the table's rows are then read from the state's new
    snapshot (``from_state``); when neither is partitioned, the change's partials appended to the state (a log)
    and the table summed from it, compacted now and then (:func:`_whole`; ``appended_rows``: the aggregate's
    input rows of an append-only change without joins, and how many the appends added)."""
    from pyspark.sql import functions as F

    if not shape.slots:  # DISTINCT: the groups the table does not hold yet, appended
        new = incremental_merge.new_keys(shape, change, spark.table(table.quoted))
        return appended(spark, table, new, partitioned_by, write_options)
    names = [f"k{i}" for i in scope or ()]
    if state is not None and not names and not partitioned_by:
        return _whole(spark, table, shape, change, state, removes=removes, appended_rows=appended_rows)
    found = (
        change.groupBy(*names)
        .agg(F.count(F.lit(1)).alias("groups"), *[F.col(n).cast("string").alias(f"t_{n}") for n in names])
        .limit(MAX_PARTITIONS_LISTED + 1)
        .collect()
        if names
        else change.agg(F.count(F.lit(1)).alias("groups")).collect()
    )
    count = sum(int(r["groups"]) for r in found)
    if not count:  # the change's rows fall in no group (the query's filter below its aggregate)
        return Written(None, None, 0, [])
    touched = [tuple(r[n] for n in names) for r in found] if names else None
    if touched is not None and len(touched) > MAX_PARTITIONS_LISTED:
        touched = None
    columns = incremental_merge.partial_columns(shape)
    if state is not None:
        old = _at(spark, state, incremental_state.current(spark, state))
        if touched is not None:
            old = old.where(incremental_merge.where_partitions(names, touched))
        columns = [incremental_merge.ROWS, *columns]
    else:
        read = spark.table(table.quoted)
        if touched is not None:
            read = read.where(incremental_merge.where_partitions(table_partitions(shape, scope), touched))
        old = incremental_merge.table_as_partials(shape, read)
        columns = incremental_merge.table_partial_columns(shape)
    rows = incremental_merge.combined(shape, old, change, columns)
    if touched is not None:
        written = table_partitions(shape, scope)
        partitions = sorted(
            ({c: r[f"t_{n}"] for c, n in zip(written, names, strict=True)} for r in found),
            key=lambda p: [str(v) for v in p.values()],
        )
    elif partitioned_by:  # partitioned by an aggregate, or past the listed partitions: from the changed rows
        changed = rows.where(F.col(incremental_merge.CHANGED) == 1)
        count, partitions = counted(incremental_merge.table_rows(shape, changed), partitioned_by)
    else:
        partitions = []
    keys = incremental_merge.key_names(shape)
    where = state_where = None
    if removes and touched is not None:  # a touched partition may be left without groups
        where = incremental_merge.where_partitions(table_partitions(shape, scope), touched)
        state_where = incremental_merge.where_partitions(names, touched)
    if state is None:
        table_rows = incremental_merge.table_rows(shape, rows)
        return Written(table_rows, None, count, partitions, scoped=touched is not None, where=where)

    def from_state(snapshot: int | None) -> DataFrame:
        assert state is not None
        read = _at(spark, state, snapshot)
        if touched is not None:
            read = read.where(incremental_merge.where_partitions(names, touched))
        return incremental_merge.table_rows(shape, read)

    return Written(
        None,
        rows.select(*keys, *columns),
        count,
        partitions,
        scoped=touched is not None,
        from_state=from_state,
        where=where,
        state_where=state_where,
    )


def _whole(
    spark: SparkSession,
    table: TableIdentifier,
    shape: AggregateShape,
    change: DataFrame,
    state: TableIdentifier,
    *,
    removes: bool,
    appended_rows: tuple[DataFrame, int] | None = None,
) -> Written:
    """Neither table partitioned: every group's row is rewritten, the state's need not be. The change's
    partials (one row per changed group; with removals, without the groups they leave as they were) are
    appended to the state — a log (``incremental_merge``, layout 4) —, and the table's rows are the old state
    and the change summed by key, written beside the append (``SIDE_BY_SIDE``; else after it, from the
    state's new snapshot); the changed groups are the rows the append added (its snapshot's
    ``added-records``, no Spark job). When the state holds ``COMPACT_ROWS_PER_GROUP`` rows per group or more
    (its and the table's ``total-records``), it is instead rewritten from the old state combined with the
    change, one row per group, and the table then read from it as it is (the groups counted as the state's
    write runs: an observation of its rows). A small append-only change (``appended_rows``, with the old
    state at most ``SINGLE_TASK_ROWS`` rows together) is read in one Spark task by each write: no shuffle."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    keys = incremental_merge.key_names(shape)
    columns = [incremental_merge.ROWS, *incremental_merge.partial_columns(shape)]
    before = incremental_state.current(spark, state)
    state_rows, groups = incremental_state.records(spark, state), incremental_state.records(spark, table)
    single = (
        appended_rows is not None
        and state_rows is not None
        and state_rows + appended_rows[1] <= SINGLE_TASK_ROWS
    )
    if single and appended_rows is not None:  # the change's partials aggregated in one task
        change = incremental_merge.partials(spark, shape, appended_rows[0].coalesce(1))
    if removes:
        change = incremental_merge.changed_only(shape, change)
    old = _at(spark, state, before)
    if not incremental_merge.compacts(state_rows, groups):
        rows = change.select(*keys, *columns)
        counted = lambda: incremental_state.added_records(spark, state, before)  # noqa: E731
        if SIDE_BY_SIDE:  # the table's rows from the old state and the change, not from the state's append
            table_rows = incremental_merge.table_rows(
                shape, incremental_merge.combined(shape, old, change, columns, single_task=single)
            )
            return Written(table_rows, rows, 0, [], state_append=True, side_by_side=True, counted=counted)

        def from_state(snapshot: int | None) -> DataFrame:
            read = _at(spark, state, snapshot)
            return incremental_merge.table_rows(
                shape, incremental_merge.summed(shape, read.coalesce(1) if single else read)
            )

        return Written(None, rows, 0, [], state_append=True, from_state=from_state, counted=counted)
    rows = incremental_merge.combined(shape, old, change, columns, single_task=single)
    seen = Observation("tms_changed_groups")
    observed = rows.observe(seen, F.coalesce(F.sum(incremental_merge.CHANGED), F.lit(0)).alias("groups"))
    return Written(
        None,
        observed.select(*keys, *columns),
        0,
        [],
        from_state=lambda snapshot: incremental_merge.table_rows(shape, _at(spark, state, snapshot)),
        counted=lambda: int(seen.get["groups"]),
    )


def side_by_side(first: Callable[[], None], second: Callable[[], None]) -> None:
    """Run ``first`` here and ``second`` in a thread that inherits this one's Spark job group and tags (the
    wall clock's cancel and the run's cost reach both), and raise the first failure. Their commits come in
    either order, and a stop between them is repaired either way: the state ahead of the record is rolled
    back, the table ahead of it makes the next refresh FULL (``incremental_decision``)."""
    from pyspark import InheritableThread

    failed: list[BaseException] = []

    def run() -> None:
        try:
            second()
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            failed.append(e)

    thread = InheritableThread(target=run, name="tablemgmt-table-write")
    thread.start()
    try:
        first()
    finally:
        thread.join()
    if failed:
        raise failed[0]


def _at(spark: SparkSession, table: TableIdentifier, snapshot: int | None) -> DataFrame:
    """``table`` read at ``snapshot`` (pinned: a read after its own write still sees the rows before it)."""
    reader = spark.read if snapshot is None else spark.read.option("snapshot-id", str(snapshot))
    return reader.table(table.quoted)


def table_partitions(shape: AggregateShape, scope: tuple[int, ...] | None) -> tuple[str, ...]:
    """The table's partition columns of the keys ``scope`` (the first output column of each)."""
    key_column = {index: name for name, kind, index in reversed(shape.columns) if kind == "key"}
    return tuple(key_column[i] for i in scope or ())


def counted(rows: DataFrame, columns: tuple[str, ...]) -> tuple[int, list[dict[str, Any]]]:
    """How many ``rows`` and the partitions (``columns``' values as text) they fall in: one Spark job."""
    from pyspark.sql import functions as F

    if not columns:
        return int(rows.count()), []
    found = rows.groupBy(*[F.col(quote(c)).cast("string").alias(c) for c in columns]).count().collect()
    count = sum(int(r["count"]) for r in found)
    partitions = sorted(
        ({c: r[c] for c in columns} for r in found), key=lambda p: [str(v) for v in p.values()]
    )
    return count, partitions
