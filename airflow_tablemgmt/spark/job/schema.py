"""Column lookups against a table's schema, with errors that list what the table has."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_tablemgmt.core.identifiers import TableIdentifier, validate_identifier
from airflow_tablemgmt.spark.errors import ColumnNotFound

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructField


def table_fields(spark: SparkSession, table: TableIdentifier) -> list[StructField]:
    return list(spark.table(table.quoted).schema.fields)


def resolve_columns(
    spark: SparkSession, table: TableIdentifier, columns: list[str], option: str
) -> list[StructField]:
    """The schema fields for ``columns`` (matched case-insensitively, as Spark does by default).

    Raises ``ColumnNotFound`` naming the option, the column and the table's columns.
    """
    fields = table_fields(spark, table)
    by_name = {f.name.lower(): f for f in fields}
    out = []
    for column in columns:
        validate_identifier(column, option)
        found = by_name.get(column.lower())
        if found is None:
            raise ColumnNotFound(
                f"{option}: column {column!r} is not in table {table}; "
                f"its columns: {', '.join(f.name for f in fields)}"
            )
        out.append(found)
    return out
