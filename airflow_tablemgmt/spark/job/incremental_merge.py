"""Combining the change of a ``GROUP BY`` / ``DISTINCT`` query with what its dynamic table already holds.

The change's input rows (the aggregate's input, read as ``delta_terms`` says) are aggregated by the query's
own grouping expressions into *partials* (:func:`partials`): per group its row count ``tms_rows`` and, per
output aggregate, ``count`` → ``c<j>``, ``min`` / ``max`` → ``m<j>``, ``sum`` and ``avg`` → the sum
``s<j>`` and the count of non-null values ``n<j>`` (an ``avg``'s sum in ``double`` as Spark's ``avg`` sums,
or in the decimal type Spark's ``sum`` gives a decimal).

Rows a source's delete or overwrite removed (Iceberg's changelog) are aggregated the same way and
subtracted (:func:`signed`: their counts and sums negated): a group whose row count reaches 0 disappears,
a ``sum`` whose count of non-null values reaches 0 is NULL again. ``min`` / ``max`` cannot be subtracted:
such a refresh is FULL (``AggregateShape.removal_problem``).

Under appends a group only grows, so each partial column combines with the old one by a function Spark
already has: counts and sums add (``sum`` stays NULL while every value is NULL, as Spark's own), ``min`` /
``max`` take the least / greatest. The old partials are the state table's rows for a query with ``avg``
(it keeps every partial column of every group), else the dynamic table's own rows read back as partials
(its ``count`` / ``sum`` / ``min`` / ``max`` columns are their own partials). :func:`combined` is the old
partials ``UNION ALL`` the change's, aggregated once by the keys (one shuffle, no join; ``GROUP BY`` puts
NULL keys together as the query does), with ``tms_changed`` marking the groups the change touched.
:func:`table_rows` turns partials into the table's columns (an ``avg`` is its sum over its count).

The written unit is a partition: the old partials are read only where the change lands when the table is
partitioned by grouping keys only (:func:`scoped_keys`), and :func:`write_groups` replaces exactly those
partitions (Iceberg's dynamic overwrite, one commit), or the whole table when it is not partitioned that way.
No ``MERGE``: a MERGE joins the whole target to find the rows it rewrites, and with copy-on-write rewrites
every file holding a changed group anyway.

**The state is a log of partials** (layout 4): a group may have several rows in the state table, and every
reader adds them up by key (:func:`combined`, :func:`summed`). A state that is not partitioned — the table is
rewritten whole anyway — takes each refresh's change as one small append of its partials (one row per changed
group) instead of being rewritten whole; the refresh that finds it holding :data:`COMPACT_ROWS_PER_GROUP`
rows per group or more (:func:`compacts`, from the snapshots' ``total-records``, no Spark job) rewrites it
with one row per group. A partitioned state is rewritten partition by partition, one row per group, as the
table is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.spark.job.incremental_plan import AggregateShape, column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

ROWS = "tms_rows"
CHANGED = "tms_changed"
# The state table's layout version: a state table written by another layout is rebuilt by a FULL refresh.
# 3: a sum keeps its count of non-null values (n<j>) too, for removals.
# 4: a group's partials may be several rows (a log: readers add them up by key, see the module's docstring).
LAYOUT_VERSION = "4"
# A state kept as a log is compacted (one row per group) by the refresh that finds this many rows per group.
COMPACT_ROWS_PER_GROUP = 2.0


def _is_decimal(expression: Any) -> bool:
    return str(expression.dataType().simpleString()).startswith("decimal")


def key_names(shape: AggregateShape) -> list[str]:
    return [f"k{i}" for i in range(len(shape.grouping))]


def partial_columns(shape: AggregateShape) -> list[str]:
    """The partial columns behind each slot, in slot order (without the keys and ``tms_rows``)."""
    names: list[str] = []
    for j, slot in enumerate(shape.slots):
        if slot.function == "count":
            names.append(f"c{j}")
        elif slot.function in ("sum", "avg"):
            names += [f"s{j}", f"n{j}"]
        else:
            names.append(f"m{j}")
    return names


def table_partial_columns(shape: AggregateShape) -> list[str]:
    """The partial columns a query without a state table reads from its own table: every slot's, with
    ``tms_rows`` from a ``count(*)`` column and a sum's ``n<j>`` from a ``count`` of its argument when the
    query has them (what subtracting removed rows needs: ``AggregateShape.needs_state``)."""
    names = [ROWS] if shape.row_count_slot() is not None else []
    for j, slot in enumerate(shape.slots):
        if slot.function == "count":
            names.append(f"c{j}")
        elif slot.function == "sum":
            names += [f"s{j}"] + ([f"n{j}"] if shape.count_slot_of(j) is not None else [])
        else:
            names.append(f"m{j}")
    return names


def state_columns(shape: AggregateShape) -> list[str]:
    """The state table's columns: the keys, ``tms_rows``, then every slot's partials."""
    return [*key_names(shape), ROWS, *partial_columns(shape)]


def layout(shape: AggregateShape, partition_keys: Sequence[int]) -> str:
    """What the state table's rows mean (its ``tablemgmt.state-layout`` property): the version, the slots'
    functions and types, the keys' types and the keys it is partitioned by. A state table whose property
    differs was written for another query or by another layout, and is rebuilt by a FULL refresh."""
    slots = ",".join(f"{s.function}:{s.type}" for s in shape.slots)
    keys = ",".join(shape.key_types)
    parts = ",".join(f"k{i}" for i in partition_keys)
    return f"{LAYOUT_VERSION};slots={slots};keys={keys};partitioned={parts}"


def scoped_keys(partition_columns: Sequence[str] | None, shape: AggregateShape) -> tuple[int, ...] | None:
    """The grouping keys (indices) the table is partitioned by, when every partition column is a key column
    (then a change touches only its groups' partitions); None when a partition column is an aggregate (a
    group may move between partitions) or a transform: the whole table is rewritten."""
    if partition_columns is None:
        return None
    keys = {name: index for name, kind, index in shape.columns if kind == "key"}
    if any(c not in keys for c in partition_columns):
        return None
    return tuple(keys[c] for c in partition_columns)


def partials(spark: SparkSession, shape: AggregateShape, rows: DataFrame) -> DataFrame:
    """``rows`` (the aggregate's input) aggregated per group into ``k<i>``, ``tms_rows`` and the partials."""
    from pyspark.sql import functions as F

    keys = [column(spark, g).alias(f"k{i}") for i, g in enumerate(shape.grouping)]
    aggregates: list[Column] = [F.count(F.lit(1)).alias(ROWS)]
    for j, slot in enumerate(shape.slots):
        argument = column(spark, slot.argument)
        if slot.function == "count":
            aggregates.append(F.count(argument).alias(f"c{j}"))
        elif slot.function == "sum":
            aggregates += [F.sum(argument).alias(f"s{j}"), F.count(argument).alias(f"n{j}")]
        elif slot.function == "avg":
            summed = argument if _is_decimal(slot.argument) else argument.cast("double")
            aggregates += [F.sum(summed).alias(f"s{j}"), F.count(argument).alias(f"n{j}")]
        else:
            aggregates.append(getattr(F, slot.function)(argument).alias(f"m{j}"))
    return rows.groupBy(*keys).agg(*aggregates)


def state_rows(shape: AggregateShape, part: DataFrame) -> DataFrame:
    """The state table's rows for ``part``."""
    return part.select(*state_columns(shape))


def table_as_partials(shape: AggregateShape, table: DataFrame) -> DataFrame:
    """The dynamic table's rows as partials (a query without a state table: its columns are their own
    partials), the columns :func:`table_partial_columns` names."""
    from pyspark.sql import functions as F

    key_column = {index: name for name, kind, index in reversed(shape.columns) if kind == "key"}
    slot_column = {index: name for name, kind, index in shape.columns if kind == "slot"}
    out = [F.col(quote(key_column[i])).alias(f"k{i}") for i in range(len(shape.grouping))]
    rows = shape.row_count_slot()
    if rows is not None:
        out.append(F.col(quote(slot_column[rows])).alias(ROWS))
    for j, slot in enumerate(shape.slots):
        prefix = {"count": "c", "sum": "s"}.get(slot.function, "m")
        out.append(F.col(quote(slot_column[j])).alias(f"{prefix}{j}"))
        counted = shape.count_slot_of(j) if slot.function == "sum" else None
        if counted is not None:
            out.append(F.col(quote(slot_column[counted])).alias(f"n{j}"))
    return table.select(*out)


def signed(shape: AggregateShape, added: DataFrame, removed: DataFrame) -> DataFrame:
    """The change's partials with removed rows subtracted: ``added``'s partials ``UNION ALL`` ``removed``'s
    negated, summed per group (``min`` / ``max`` never come here: ``AggregateShape.removal_problem``)."""
    from pyspark.sql import functions as F

    keys = key_names(shape)
    columns = [ROWS, *partial_columns(shape)]
    types = {f.name: f.dataType for f in added.schema.fields}
    negated = removed.select(*keys, *[(-F.col(c)).cast(types[c]).alias(c) for c in columns])
    summed = [F.sum(c).cast(types[c]).alias(c) for c in columns]
    return added.select(*keys, *columns).unionByName(negated).groupBy(*keys).agg(*summed)


def combined(
    shape: AggregateShape, old: DataFrame, part: DataFrame, columns: list[str], *, single_task: bool = False
) -> DataFrame:
    """Per group, the old partials combined with the change's (``columns``: which partial columns), and
    ``tms_changed`` = 1 for the groups the change touched. A group's several old rows (a state kept as a log)
    are added up with them: the result has one row per group. ``single_task``: both read into one Spark
    partition first, so that the aggregate needs no shuffle (one stage; for small inputs)."""
    from pyspark.sql import functions as F

    keys = key_names(shape)
    types = {f.name: f.dataType for f in part.schema.fields}
    function = {f"m{j}": s.function for j, s in enumerate(shape.slots)}
    new = part.select(*keys, *columns, F.lit(1).alias(CHANGED))
    was = old.select(*[F.col(c).cast(types[c]).alias(c) for c in (*keys, *columns)], F.lit(0).alias(CHANGED))
    aggregates: list[Column] = []
    for c in columns:
        pick = getattr(F, function[c]) if c in function else F.sum
        aggregates.append(pick(c).cast(types[c]).alias(c))
    both = was.unionByName(new)
    if single_task:
        both = both.coalesce(1)
    out = both.groupBy(*keys).agg(*aggregates, F.max(CHANGED).alias(CHANGED))
    if keys and ROWS in columns:  # a group whose rows were all removed disappears (a global one stays)
        out = out.where(F.col(ROWS) > 0)
    return out


def summed(shape: AggregateShape, rows: DataFrame) -> DataFrame:
    """A state's rows (a log of partials, layout 4) as one row per group: counts and sums added, ``min`` /
    ``max`` the least / greatest; a group whose row count adds up to 0 is gone (a global one stays)."""
    from pyspark.sql import functions as F

    keys = key_names(shape)
    types = {f.name: f.dataType for f in rows.schema.fields}
    function = {f"m{j}": s.function for j, s in enumerate(shape.slots)}
    aggregates: list[Column] = []
    for c in (ROWS, *partial_columns(shape)):
        pick = getattr(F, function[c]) if c in function else F.sum
        aggregates.append(pick(c).cast(types[c]).alias(c))
    out = rows.groupBy(*keys).agg(*aggregates)
    return out.where(F.col(ROWS) > 0) if keys else out


def changed_only(shape: AggregateShape, part: DataFrame) -> DataFrame:
    """``part`` (signed partials, removals subtracted) without the groups whose partials all add up to 0: a
    copy-on-write rewrite reads a file's untouched rows as removed and added again, which change nothing
    (``min`` / ``max`` never come here: ``AggregateShape.removal_problem``)."""
    from pyspark.sql import functions as F

    moved = F.col(ROWS) != 0
    for c in partial_columns(shape):
        if not c.startswith("m"):
            moved = moved | (F.coalesce(F.col(c), F.lit(0)) != 0)
    return part.where(moved)


def compacts(state_rows: int | None, groups: int | None) -> bool:
    """Whether a state kept as a log is rewritten with one row per group by this refresh: it holds
    :data:`COMPACT_ROWS_PER_GROUP` rows per group of the table (``groups``: its rows) or more, or a count is
    unknown."""
    if state_rows is None or groups is None:
        return True
    return state_rows >= COMPACT_ROWS_PER_GROUP * max(groups, 1)


def table_rows(shape: AggregateShape, rows: DataFrame) -> DataFrame:
    """The table's columns (in its order and types) from partials."""
    from pyspark.sql import functions as F

    out: list[Column] = []
    for name, kind, index in shape.columns:
        if kind == "key":
            out.append(F.col(f"k{index}").alias(name))
            continue
        slot = shape.slots[index]
        if slot.function == "count":
            value = F.col(f"c{index}")
        elif slot.function == "sum":
            value = F.col(f"s{index}")
            if f"n{index}" in rows.columns:  # NULL again once every non-null value was removed
                value = F.when(F.col(f"n{index}") == 0, F.lit(None)).otherwise(value)
        elif slot.function in ("min", "max"):
            value = F.col(f"m{index}")
        else:
            s, n = F.col(f"s{index}"), F.col(f"n{index}")
            quotient = s.cast("double") / n if not _is_decimal(slot.argument) else s / n
            value = F.when(F.coalesce(n, F.lit(0)) == 0, F.lit(None)).otherwise(quotient)
        out.append(value.cast(slot.type).alias(name))
    return rows.select(*out)


def where_partitions(columns: Sequence[str], values: Sequence[Sequence[Any]]) -> Column:
    """``(c1 = v1 AND c2 = v2) OR …`` over the partitions ``values`` (NULL as ``IS NULL``), which Iceberg
    prunes by."""
    from pyspark.sql import functions as F

    condition = F.lit(False)
    for row in values:
        term = F.lit(True)
        for name, value in zip(columns, row, strict=True):
            col = F.col(quote(name))
            term = term & (col.isNull() if value is None else col == F.lit(value))
        condition = condition | term
    return condition


def new_keys(shape: AggregateShape, part: DataFrame, table: DataFrame) -> DataFrame:
    """A ``DISTINCT`` query's change: the groups not in the table yet, as the table's rows (to append)."""
    from pyspark.sql import functions as F

    keys = key_names(shape)
    key_column = {index: name for name, kind, index in reversed(shape.columns) if kind == "key"}
    old = table.select(*[F.col(quote(key_column[i])).alias(f"o{i}") for i in range(len(keys))])
    on = F.lit(True)
    for i, k in enumerate(keys):
        on = on & part[k].eqNullSafe(old[f"o{i}"])
    return table_rows(shape, part.join(old, on, "left_anti"))


def append_groups(target: TableIdentifier, rows: DataFrame) -> None:
    """Append ``rows`` (a change's partials) to the state table kept as a log, in one commit."""
    rows.writeTo(str(target)).append()


def write_groups(
    target: TableIdentifier,
    rows: DataFrame,
    *,
    scoped: bool,
    options: dict[str, str] | None = None,
    where: Column | None = None,
) -> None:
    """Replace the partitions ``rows`` fall in (``scoped``: Iceberg's dynamic overwrite), the rows ``where``
    selects (the partitions a change with removals touched: one may be left empty, which a dynamic overwrite
    would not clear), or the whole table with ``rows``, in one commit."""
    from pyspark.sql import functions as F

    writer = rows.writeTo(str(target)).options(**(options or {}))
    if where is not None:
        writer.overwrite(where)
    elif scoped:
        writer.overwritePartitions()
    else:
        writer.overwrite(F.lit(True))
