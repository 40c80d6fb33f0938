"""An incremental refresh of a dynamic table: decide from what changed, then commit the change once.

``refresh.overwrite`` calls :func:`attempt` for a refresh of the whole table (not a partition refresh,
not a creation or recreation) once it has read the sources' current snapshots. The decision is
``core.dynamic.incremental_decision.decide`` over what this job reads itself (``incremental_state``): each
source's snapshots since the one the last refresh recorded (handed in as ``previous`` by the factory), the
dynamic table's own history since the snapshot that refresh left, and the state table's. Then, by the
analysis' strategy:

* ``APPEND`` (filters and projections) and ``JOIN`` (inner joins): the query's plan read as
  ``core.dynamic.delta_terms`` says (the appended rows of each changed source; for joins one term per
  changed side, the other sides at this or the last refresh's snapshot) gives the new rows, appended in one
  commit; when a source's copy-on-write delete or overwrite removed rows, the same plan over the rows
  Iceberg's changelog marks deleted gives the removed ones, and the partitions the change touches are
  rewritten without them (``incremental_write.replaced``);
* ``MERGE_BY_KEY`` (``GROUP BY`` / ``DISTINCT``): the aggregate's input read the same way is aggregated
  into partials and combined with the old partials of the groups' partitions (``incremental_merge``: the
  state table's for a query with ``avg``, which keeps every aggregate's partials, else the table's own);
  the result replaces those partitions (the whole table when it is not partitioned by grouping keys), the
  state table first (``incremental_state``; not partitioned, the change's partials appended to it, a log
  summed by key when read), then the table; removed rows' partials are subtracted
  (``incremental_merge.signed``). A ``DISTINCT`` appends its new groups.

Per-phase seconds go to the job's timings (``incremental_decide``, ``incremental_plan``,
``incremental_read`` — for an unpartitioned append, the write too —, ``incremental_state_write``,
``incremental_table_write``, or ``incremental_writes`` for the two side by side).

Every read of a source is pinned to the snapshot this refresh records (the change *up to* it, or the table
*at* it), so what the next refresh reads starts exactly where this one stopped: a change is never read
twice nor skipped. A failure before the first commit (a read Iceberg refuses, say) makes the refresh FULL
naming it; after it, the job fails and the next refresh repairs (``incremental_decision``).

:func:`attempt` answers the mode and, when it committed (or had nothing to add), the summary's fields;
else ``refresh.overwrite`` writes in full, reading the sources pinned the same way (:func:`pinned_frame`),
and rebuilds the state table (:func:`rebuild_state`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.dynamic import delta_terms
from airflow_tablemgmt.core.dynamic.incremental import (
    APPEND,
    FULL,
    INCREMENTAL,
    MERGE_BY_KEY,
    Analysis,
    ModePlan,
)
from airflow_tablemgmt.core.dynamic.incremental_decision import (
    STATE_REBUILD,
    STATE_ROLLBACK,
    Previous,
    decide,
    state_layout_problem,
    state_repair,
    table_problem,
)
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.spark.job import (
    incremental_merge,
    incremental_plan,
    incremental_state,
    incremental_write,
    lease_guard,
)
from airflow_tablemgmt.spark.job.incremental_plan import AggregateShape
from airflow_tablemgmt.spark.protocol import describe_exception, timed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

PARTITION_REFRESH = (
    "a partition refresh recomputes the partitions it names (date formatters or static partitions)"
)
MAX_PARTITIONS_LISTED = incremental_write.MAX_PARTITIONS_LISTED


@dataclass
class Attempt:
    """What :func:`attempt` did: the mode and why; ``summary`` when the refresh is done (incremental);
    ``shape`` the query's aggregate (a FULL refresh rebuilds its state table from it)."""

    mode: ModePlan
    summary: dict[str, Any] | None = None
    shape: AggregateShape | None = None


def shape_of(df: DataFrame, analysis: Analysis) -> AggregateShape | str | None:
    """The aggregate a ``MERGE_BY_KEY`` query is merged by (or why it cannot be as it is); None otherwise."""
    if analysis.strategy != MERGE_BY_KEY:
        return None
    return incremental_plan.aggregate_shape(incremental_plan.analysed(df))


def pinned_frame(spark: SparkSession, df: DataFrame, snapshots: dict[str, int | None]) -> DataFrame:
    """``df`` with every source read at the snapshot this refresh records."""
    plan = incremental_plan.analysed(df)
    reads = delta_terms.pinned(incremental_plan.occurrences(plan), snapshots)
    return incremental_plan.frame(spark, incremental_plan.substitute(spark, plan, reads))


def _kinds(plan: Any) -> set[str]:
    out: set[str] = set()
    pending = [plan]
    while pending:
        node = pending.pop()
        out.add(str(node.getClass().getSimpleName()))
        pending.extend(node.children().apply(i) for i in range(node.children().size()))
    return out


def _state(
    spark: SparkSession,
    state: TableIdentifier,
    shape: AggregateShape,
    scope: tuple[int, ...] | None,
    previous: Previous,
) -> tuple[str, str | None]:
    """What to do with the state table before the change is added (``state_repair``), and why a FULL
    refresh must rebuild it (None: it can be used, after a rollback if so)."""
    exists = incremental_state.exists(spark, state)
    now_state, _, met = (
        incremental_state.history(spark, state, previous.state_snapshot_id) if exists else (None, [], False)
    )
    action, why = state_repair(str(state), previous.state_snapshot_id, now_state, recorded_is_ancestor=met)
    if action == STATE_REBUILD:
        return action, why
    found = incremental_state.layout_of(spark, state)
    wrong = state_layout_problem(str(state), found, incremental_merge.layout(shape, scope or ()))
    if wrong is not None:
        return STATE_REBUILD, wrong
    if action == STATE_ROLLBACK:
        log.warning("%s", why)
    return action, None


def _delta(spark: SparkSession, plan: Any, terms: list[list[delta_terms.Read]]) -> DataFrame:
    frames = [incremental_plan.frame(spark, incremental_plan.substitute(spark, plan, t)) for t in terms]
    out = frames[0]
    for other in frames[1:]:
        out = out.unionAll(other)
    return out


def attempt(
    spark: SparkSession,
    table: TableIdentifier,
    *,
    declared: str,
    df: DataFrame,
    analysis: Analysis,
    snapshots: dict[str, int | None],
    previous: Previous | None,
    partitioned_by: tuple[str, ...],
    write_options: dict[str, str],
) -> Attempt:
    """Refresh ``table`` incrementally if the decision allows it; else the mode FULL and why."""
    shape = shape_of(df, analysis) if str(declared).upper() != FULL else None
    aggregate = shape if isinstance(shape, AggregateShape) else None
    changes: dict[str, Any] = {}
    problem = None
    state_action, state_problem = "", None
    state = incremental_state.state_table(table)
    scope: tuple[int, ...] | None = None
    if previous is not None and analysis.incremental and str(declared).upper() != FULL:
        with timed("incremental_decide"):
            for source, now in snapshots.items():
                if source in previous.source_snapshots:
                    changes[source] = incremental_state.source_change(
                        spark, source, previous.source_snapshots[source], now
                    )
            current, newer, reached = incremental_state.history(spark, table, previous.snapshot_id)
            problem = table_problem(str(table), previous.snapshot_id, current, newer, reached=reached)
            if isinstance(shape, str):
                problem = problem or f"the query's aggregate cannot be merged by key: {shape}"
            if aggregate is not None:
                scope = incremental_merge.scoped_keys(
                    incremental_state.identity_partitions(spark, table), aggregate
                )
            if aggregate is not None and aggregate.needs_state:
                state_action, state_problem = _state(spark, state, aggregate, scope, previous)
    mode = decide(
        declared,
        analysis,
        previous,
        changes,
        table_problem=problem,
        state_problem=state_problem,
        removal_problem=None if aggregate is None else aggregate.removal_problem,
    )
    if mode.mode != INCREMENTAL:
        return Attempt(mode, shape=aggregate)
    plan = incremental_plan.analysed(df) if aggregate is None else aggregate.child
    kinds = _kinds(plan)
    terms = delta_terms.terms(
        incremental_plan.occurrences(plan), changes, joined="Join" in kinds, unioned="Union" in kinds
    )
    if isinstance(terms, str):
        return Attempt(
            ModePlan(FULL, f"the query cannot be refreshed incrementally as it is: {terms}"), shape=aggregate
        )
    removed_terms = delta_terms.removals(terms)
    assert previous is not None
    if state_action == STATE_ROLLBACK and previous.state_snapshot_id is not None:
        incremental_state.rollback(spark, state, previous.state_snapshot_id)
    done: dict[str, Any] = {
        "refresh_action": INCREMENTAL,
        "source_changes": {
            t: {"kind": c.kind, "since": c.since, "current": c.current} for t, c in sorted(changes.items())
        },
        "state_snapshot_id": previous.state_snapshot_id
        if aggregate is not None and aggregate.needs_state
        else None,
    }
    if not terms:
        now = incremental_state.current(spark, table)
        return Attempt(
            mode, {**done, "rows_written": 0, "partitions_written": [], "snapshot_id": now}, aggregate
        )
    try:
        with timed("incremental_plan"):  # the query's plan copied with the change's reads (driver, py4j)
            delta = _delta(spark, plan, terms)
            gone = _delta(spark, plan, removed_terms) if removed_terms else None
            change = None if aggregate is None else incremental_merge.partials(spark, aggregate, delta)
            if aggregate is not None and change is not None and gone is not None:
                removed = incremental_merge.partials(spark, aggregate, gone)
                change = incremental_merge.signed(aggregate, change, removed)
        with timed("incremental_read"):
            if aggregate is None and gone is not None:
                written = incremental_write.replaced(spark, table, delta, gone, partitioned_by)
            elif aggregate is None or change is None:
                written = incremental_write.appended(spark, table, delta, partitioned_by, write_options)
            else:
                written = incremental_write.grouped(
                    spark,
                    table,
                    aggregate,
                    change,
                    state if aggregate.needs_state else None,
                    scope,
                    partitioned_by,
                    write_options,
                    removes=gone is not None,
                    appended_rows=None
                    if gone is not None or "Join" in kinds
                    else (delta, sum(c.added_records for c in changes.values() if c.changed)),
                )
    except Exception as e:
        refused = isinstance(e, incremental_plan.ChangelogColumnsMissing)
        if any(c.expired for c in _clocks()) or not (refused or _is_spark_error(e)):
            raise
        error_class, _ = describe_exception(e)
        log.warning("the incremental read of %s failed; refreshing in full", table, exc_info=True)
        return Attempt(
            ModePlan(FULL, f"the incremental read failed ({error_class}): refreshed in full"), shape=aggregate
        )
    if written.side_by_side and written.state is not None and written.table is not None:
        lease_guard.fence(f"the incremental refresh's writes to {state} and {table}")
        rows, state_rows = written.table, written.state
        with timed("incremental_writes"):  # the state's append and the table's write, side by side
            incremental_write.side_by_side(
                lambda: incremental_merge.append_groups(state, state_rows),
                lambda: incremental_merge.write_groups(table, rows, scoped=False, options=write_options),
            )
            done["state_snapshot_id"] = incremental_state.current(spark, state)
            if written.counted is not None:
                written.count = written.counted()
        written.state = written.table = None
    if written.state is not None:
        lease_guard.fence(f"the incremental refresh's write to {state}")
        with timed("incremental_state_write"):
            if written.state_append:
                incremental_merge.append_groups(state, written.state)
            else:
                incremental_merge.write_groups(
                    state, written.state, scoped=written.scoped, where=written.state_where
                )
            done["state_snapshot_id"] = incremental_state.current(spark, state)
            if written.counted is not None:
                written.count = written.counted()
        # An append of no partials (the change's rows fall in no group) leaves every group as it was.
        if written.from_state is not None and (written.count or not written.state_append):
            written.table = written.from_state(done["state_snapshot_id"])
    if written.table is not None:
        lease_guard.fence(f"the incremental refresh's write to {table}")
        with timed("incremental_table_write"):
            if written.append:
                written.table.writeTo(str(table)).options(**write_options).append()
            else:
                incremental_merge.write_groups(
                    table, written.table, scoped=written.scoped, options=write_options, where=written.where
                )
    with timed("incremental_table_write"):
        snapshot = incremental_state.current(spark, table)
    log.info(
        "INCREMENTAL refresh of %s: %d rows %s in snapshot %s",
        table,
        written.count,
        "appended" if written.append else "merged by key",
        snapshot,
    )
    return Attempt(
        mode,
        {
            **done,
            "rows_written": written.count,
            **({"rows_removed": written.removed} if written.removed else {}),
            "partitions_written": written.partitions,
            "snapshot_id": snapshot,
        },
        aggregate,
    )


def summary(
    tried: Attempt,
    analysis: Analysis,
    snapshots: dict[str, int | None],
    schema: list[dict[str, Any]],
    sources: list[str],
    dynamic_options: dict[str, str],
) -> dict[str, Any]:
    """The process summary of an incremental refresh (the same fields as a FULL one's)."""
    done = dict(tried.summary or {})
    partitions = list(done.pop("partitions_written", []))
    return {
        **done,
        "refresh_mode": tried.mode.mode,
        "refresh_mode_reason": tried.mode.reason,
        "incremental": analysis.to_dict(),
        "source_snapshots": snapshots,
        "partitions_written": partitions[:MAX_PARTITIONS_LISTED],
        "partitions_written_count": len(partitions),
        "incremental_base": True,
        "recreated": False,
        "schema_changes": [],
        "schema": schema,
        "source_tables": sources,
        "dynamic_options": dict(dynamic_options),
    }


def rebuild_state(
    spark: SparkSession, table: TableIdentifier, shape: AggregateShape, df_pinned: DataFrame
) -> int | None:
    """After a FULL write: the state table from the whole (pinned) input, partitioned by the keys the table
    is partitioned by; None when the query keeps none."""
    if not shape.needs_state:
        return None
    plan = incremental_plan.analysed(df_pinned)
    found = incremental_plan.aggregate_shape(plan)
    if isinstance(found, str):
        return None
    scope = incremental_merge.scoped_keys(incremental_state.identity_partitions(spark, table), found) or ()
    rows = incremental_plan.frame(spark, found.child)
    part = incremental_merge.partials(spark, found, rows)
    lease_guard.fence(f"the state table's write beside {table}")
    return incremental_state.replace_state(
        spark,
        incremental_state.state_table(table),
        incremental_merge.state_rows(found, part),
        table,
        layout=incremental_merge.layout(found, scope),
        partitioned_by=[f"k{i}" for i in scope],
    )


def _clocks() -> list[Any]:
    from airflow_tablemgmt.spark.job import wall_clock

    return list(wall_clock._ACTIVE)  # noqa: SLF001 - a refresh stopped at its limit is not retried in full


def _is_spark_error(e: Exception) -> bool:
    """Spark's or Iceberg's refusal of the incremental read (or of the plan's copy), not ours."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return isinstance(e, (Py4JError, PySparkException))


__all__ = [
    "APPEND",
    "PARTITION_REFRESH",
    "Attempt",
    "attempt",
    "pinned_frame",
    "rebuild_state",
    "shape_of",
    "summary",
]
