"""A dynamic table's Spark job (action ``refresh``): analyse, create, or refresh from its query."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.spark.errors import InvalidJobSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def refresh(spark: SparkSession, table: TableIdentifier, options: dict[str, Any]) -> dict[str, Any]:
    raise InvalidJobSpec(f"refresh on {table}: the dynamic-table job is being built")


# job_main.run skips its table-exists check: the ``create`` mode makes the table.
refresh.may_create_table = True  # type: ignore[attr-defined]
