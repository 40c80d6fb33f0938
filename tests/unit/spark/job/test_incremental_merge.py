"""spark/job/incremental_merge.py's pure parts: which partial columns a GROUP BY keeps, what its state table's
layout says, and when a change rewrites only its partitions (the Spark side: test_refresh_modes.py and, on
demand, test_incremental_property.py)."""

from __future__ import annotations

from airflow_tablemgmt.spark.job.incremental_merge import (
    ROWS,
    compacts,
    layout,
    partial_columns,
    scoped_keys,
    state_columns,
    table_partial_columns,
)
from airflow_tablemgmt.spark.job.incremental_plan import AggregateShape, Slot


def shape(
    *slots: tuple[str, str] | tuple[str, str, str, bool], keys: tuple[str, ...] = ("day", "customer")
) -> AggregateShape:
    """``SELECT <keys>, <slots> … GROUP BY <keys>`` as aggregate_shape gives it (no Catalyst objects needed);
    a slot is (function, type) or (function, type, its argument, whether the argument can be NULL)."""
    columns = [(k, "key", i) for i, k in enumerate(keys)]
    columns += [(f"x{j}", "slot", j) for j in range(len(slots))]
    return AggregateShape(
        node=None,
        child=None,
        grouping=tuple(keys),
        key_columns=keys,
        key_types=tuple("string" for _ in keys),
        slots=tuple(Slot(f"x{j}", s[0], None, s[1], *s[2:]) for j, s in enumerate(slots)),  # type: ignore[arg-type]
        columns=tuple(columns),
    )


def test_every_aggregate_keeps_its_partials_in_the_state() -> None:
    s = shape(("count", "bigint"), ("sum", "bigint"), ("avg", "double"), ("min", "int"), ("max", "int"))
    # a sum keeps its count of non-null values too: at 0 after removals it is NULL again
    assert partial_columns(s) == ["c0", "s1", "n1", "s2", "n2", "m3", "m4"]
    assert state_columns(s) == ["k0", "k1", ROWS, "c0", "s1", "n1", "s2", "n2", "m3", "m4"]


def test_the_layout_names_the_aggregates_the_key_types_and_the_partitions() -> None:
    s = shape(("count", "bigint"), ("avg", "decimal(16,6)"))
    assert layout(s, (0,)) == "4;slots=count:bigint,avg:decimal(16,6);keys=string,string;partitioned=k0"
    assert layout(s, ()) != layout(s, (0,))  # a table partitioned otherwise needs another state
    assert layout(shape(("avg", "double")), ()) != layout(shape(("sum", "double")), ())


def test_a_change_rewrites_its_partitions_only_when_the_table_is_partitioned_by_keys() -> None:
    s = shape(("count", "bigint"))
    assert scoped_keys([], s) == ()  # not partitioned: the whole table
    assert scoped_keys(["day"], s) == (0,)
    assert scoped_keys(["customer", "day"], s) == (1, 0)
    assert scoped_keys(["x0"], s) is None  # by an aggregate: a group may move between partitions
    assert scoped_keys(None, s) is None  # a transform (days(ts), bucket): not whole groups


def test_a_query_keeps_a_state_table_when_its_own_columns_cannot_take_removals() -> None:
    rows, nv = ("count", "bigint", "1", False), ("count", "bigint", "v", True)
    total = ("sum", "bigint", "v", True)
    # count(*), count(v), sum(v): the table's columns are every partial a removal needs
    own = shape(rows, nv, total)
    assert not own.needs_state and own.removal_problem is None
    assert table_partial_columns(own) == [ROWS, "c0", "c1", "s2", "n2"]
    # sum(v) without count(v), or no count(*): a state table keeps tms_rows and the sum's n
    assert shape(rows, total).needs_state
    assert shape(nv, total).needs_state
    assert shape(("avg", "double", "v", True)).needs_state  # avg: always
    # min / max cannot subtract removed rows (a FULL refresh then): no state table for them
    extremes = shape(rows, ("max", "int", "v", True))
    assert not extremes.needs_state
    assert extremes.removal_problem == "min / max (x1) cannot subtract removed rows"
    assert table_partial_columns(extremes) == [ROWS, "c0", "m1"]
    assert "DISTINCT" in (shape().removal_problem or "")


def test_the_state_is_a_log_of_partials_from_layout_4_compacted_at_two_rows_per_group() -> None:
    s = shape(("count", "bigint"), ("avg", "double"))
    # layout 3 kept one row per group: a state written by it is rebuilt once (a FULL refresh)
    assert layout(s, ()).startswith("4;")
    # a state kept as a log grows by the changed groups each refresh, and is rewritten with one row per
    # group by the refresh that finds it at twice the table's groups (both from the snapshots' summaries)
    assert not compacts(100_000, 100_000)  # just rebuilt
    assert not compacts(199_999, 100_000)
    assert compacts(200_000, 100_000)
    assert compacts(2, 1) and not compacts(1, 1)  # a global aggregate: one group
    assert not compacts(1, 0) and compacts(2, 0)  # every group removed: the log still compacts
    assert compacts(None, 100) and compacts(100, None)  # a figure Iceberg did not keep: compact
