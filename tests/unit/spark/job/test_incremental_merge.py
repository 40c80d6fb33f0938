"""spark/job/incremental_merge.py's pure parts: which partial columns a GROUP BY keeps, what its state table's
layout says, and when a change rewrites only its partitions (the Spark side: test_refresh_modes.py and, on
demand, test_incremental_property.py)."""

from __future__ import annotations

from airflow_tablemgmt.spark.job.incremental_merge import (
    ROWS,
    layout,
    partial_columns,
    scoped_keys,
    state_columns,
)
from airflow_tablemgmt.spark.job.incremental_plan import AggregateShape, Slot


def shape(*slots: tuple[str, str], keys: tuple[str, ...] = ("day", "customer")) -> AggregateShape:
    """``SELECT <keys>, <slots> … GROUP BY <keys>`` as aggregate_shape gives it (no Catalyst objects needed)."""
    columns = [(k, "key", i) for i, k in enumerate(keys)]
    columns += [(f"x{j}", "slot", j) for j in range(len(slots))]
    return AggregateShape(
        node=None,
        child=None,
        grouping=tuple(keys),
        key_columns=keys,
        key_types=tuple("string" for _ in keys),
        slots=tuple(Slot(f"x{j}", f, None, t) for j, (f, t) in enumerate(slots)),
        columns=tuple(columns),
    )


def test_every_aggregate_keeps_its_partials_in_the_state() -> None:
    s = shape(("count", "bigint"), ("sum", "bigint"), ("avg", "double"), ("min", "int"), ("max", "int"))
    assert partial_columns(s) == ["c0", "s1", "s2", "n2", "m3", "m4"]
    assert state_columns(s) == ["k0", "k1", ROWS, "c0", "s1", "s2", "n2", "m3", "m4"]


def test_the_layout_names_the_aggregates_the_key_types_and_the_partitions() -> None:
    s = shape(("count", "bigint"), ("avg", "decimal(16,6)"))
    assert layout(s, (0,)) == "2;slots=count:bigint,avg:decimal(16,6);keys=string,string;partitioned=k0"
    assert layout(s, ()) != layout(s, (0,))  # a table partitioned otherwise needs another state
    assert layout(shape(("avg", "double")), ()) != layout(shape(("sum", "double")), ())


def test_a_change_rewrites_its_partitions_only_when_the_table_is_partitioned_by_keys() -> None:
    s = shape(("count", "bigint"))
    assert scoped_keys([], s) == ()  # not partitioned: the whole table
    assert scoped_keys(["day"], s) == (0,)
    assert scoped_keys(["customer", "day"], s) == (1, 0)
    assert scoped_keys(["x0"], s) is None  # by an aggregate: a group may move between partitions
    assert scoped_keys(None, s) is None  # a transform (days(ts), bucket): not whole groups
