"""Merging the change of a ``GROUP BY`` / ``DISTINCT`` query into its dynamic table by key.

The change's input rows (the aggregate's input, read as ``delta_terms`` says) are aggregated by the query's
own grouping expressions into *partials* (:func:`partials`): per group its row count and, per output
aggregate, ``count`` → the count, ``sum`` → the sum, ``min`` / ``max`` → the extreme, ``avg`` → the sum
and the count of non-null values (the sum in ``double`` as Spark's ``avg`` sums, or in the decimal type
Spark's ``sum`` gives a decimal). Under appends a group only grows, so each changed group's new row is its
old row (the table's, read at the snapshot the last refresh left) combined with its partial
(:func:`merged_rows`): counts and sums add (a sum stays NULL while every value is NULL), ``min`` / ``max``
take the least / greatest, and an ``avg`` is the state table's sum and count plus the partial's, divided.
The table is then changed by one ``MERGE INTO … ON <keys, NULL-safe>`` (:func:`merge_into`): updated and
new groups only, so with copy-on-write only the files (and partitions) holding the changed groups are
rewritten.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.spark.job.incremental_plan import AggregateShape, column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

ROWS = "tms_rows"


def _is_decimal(expression: Any) -> bool:
    return str(expression.dataType().simpleString()).startswith("decimal")


def partials(spark: SparkSession, shape: AggregateShape, rows: DataFrame) -> DataFrame:
    """``rows`` (the aggregate's input) aggregated per group: ``k<i>`` keys, ``tms_rows``, and per slot
    ``c<j>`` (count), ``s<j>`` (sum), ``m<j>`` (min/max) or ``s<j>``, ``n<j>`` (avg)."""
    from pyspark.sql import functions as F

    keys = [column(spark, g).alias(f"k{i}") for i, g in enumerate(shape.grouping)]
    aggregates: list[Column] = [F.count(F.lit(1)).alias(ROWS)]
    for j, slot in enumerate(shape.slots):
        argument = column(spark, slot.argument)
        if slot.function == "count":
            aggregates.append(F.count(argument).alias(f"c{j}"))
        elif slot.function == "sum":
            aggregates.append(F.sum(argument).alias(f"s{j}"))
        elif slot.function == "avg":
            summed = argument if _is_decimal(slot.argument) else argument.cast("double")
            aggregates += [F.sum(summed).alias(f"s{j}"), F.count(argument).alias(f"n{j}")]
        else:
            aggregates.append(getattr(F, slot.function)(argument).alias(f"m{j}"))
    return rows.groupBy(*keys).agg(*aggregates)


def state_rows(shape: AggregateShape, part: DataFrame) -> DataFrame:
    """The state table's rows for ``part`` (keys, then each avg's sum and count)."""
    names = [f"k{i}" for i in range(len(shape.grouping))]
    for j, slot in enumerate(shape.slots):
        if slot.function == "avg":
            names += [f"s{j}", f"n{j}"]
    return part.select(*names)


def _key_condition(left: DataFrame, right: DataFrame, left_keys: list[str], right_keys: list[str]) -> Any:
    from pyspark.sql import functions as F

    condition = F.lit(True)
    for a, b in zip(left_keys, right_keys, strict=True):
        condition = condition & left[a].eqNullSafe(right[b])
    return condition


def merged_rows(
    spark: SparkSession,
    shape: AggregateShape,
    part: DataFrame,
    table: TableIdentifier,
    state: TableIdentifier | None,
) -> tuple[DataFrame, DataFrame | None]:
    """The table's new rows for the changed groups (its columns, in its order and types) and, when the
    query has an ``avg``, the state table's new rows for them."""
    from pyspark.sql import functions as F

    key_names = [f"k{i}" for i in range(len(shape.grouping))]
    old = spark.table(table.quoted).select(
        *[F.col(quote(name)).alias(f"o{i}") for i, (name, _, _) in enumerate(shape.columns)]
    )
    target_key = {index: f"o{i}" for i, (_, kind, index) in enumerate(shape.columns) if kind == "key"}
    joined = part.join(
        old, _key_condition(part, old, key_names, [target_key[i] for i in range(len(key_names))]), "left"
    )
    new_state = None
    if state is not None:
        st = spark.table(state.quoted)
        st = st.select(*[F.col(c).alias(f"t_{c}") for c in st.columns])
        joined = joined.join(st, _key_condition(joined, st, key_names, [f"t_{k}" for k in key_names]), "left")
    out: list[Column] = []
    slot_column = {index: f"o{i}" for i, (_, kind, index) in enumerate(shape.columns) if kind == "slot"}
    state_columns: list[Column] = [F.col(k) for k in key_names]
    for name, kind, index in shape.columns:
        if kind == "key":
            out.append(F.col(f"k{index}").alias(name))
            continue
        slot = shape.slots[index]
        was = F.col(slot_column[index])
        if slot.function == "count":
            value = F.coalesce(was, F.lit(0)) + F.col(f"c{index}")
        elif slot.function == "sum":
            new = F.col(f"s{index}")
            value = F.when(was.isNull(), new).when(new.isNull(), was).otherwise(was + new)
        elif slot.function in ("min", "max"):
            pick = F.least if slot.function == "min" else F.greatest
            value = pick(was, F.col(f"m{index}"))
        else:
            s = F.coalesce(F.col(f"t_s{index}"), F.lit(0)) + F.coalesce(F.col(f"s{index}"), F.lit(0))
            n = F.coalesce(F.col(f"t_n{index}"), F.lit(0)) + F.col(f"n{index}")
            value = F.when(n == 0, F.lit(None)).otherwise(
                s.cast("double") / n if not _is_decimal(slot.argument) else s / n
            )
            state_columns += [
                s.cast(part.schema[f"s{index}"].dataType).alias(f"s{index}"),
                n.cast("bigint").alias(f"n{index}"),
            ]
        out.append(value.cast(slot.type).alias(name))
    rows = joined.select(*out)
    if state is not None:
        new_state = joined.select(*state_columns)
    return rows, new_state


def merge_into(
    spark: SparkSession, target: TableIdentifier, rows: DataFrame, keys: list[str], *, update: bool = True
) -> None:
    """``MERGE INTO target USING rows ON <keys NULL-safe>``: matched rows replaced (``update``), others
    inserted. A ``DISTINCT`` query's groups have nothing to update: only new ones are inserted."""
    view = f"tms_change_{uuid.uuid4().hex[:12]}"
    rows.createOrReplaceTempView(view)
    on = " AND ".join(f"t.{quote(k)} <=> s.{quote(k)}" for k in keys) or "true"
    try:
        spark.sql(
            f"MERGE INTO {target.quoted} AS t USING {view} AS s ON {on} "
            + ("WHEN MATCHED THEN UPDATE SET * " if update else "")
            + "WHEN NOT MATCHED THEN INSERT *"
        )
    finally:
        spark.catalog.dropTempView(view)
