"""Calling Iceberg's Spark procedures with literal arguments."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote, validate_identifier
from airflow_tablemgmt.spark.job import literals

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def procedure_sql(table: TableIdentifier, procedure: str, args: dict[str, str]) -> str:
    """``CALL `cat`.system.<procedure>(table => 'ns.t', <name> => <literal>, ...)``.

    ``args`` values must already be literals (from ``spark.literals``); names are validated.
    """
    rendered = [f"table => {literals.string(table.in_catalog)}"]
    rendered += [f"{validate_identifier(name, 'argument')} => {value}" for name, value in args.items()]
    return f"CALL {quote(table.catalog)}.system.{validate_identifier(procedure, 'procedure')}({', '.join(rendered)})"


def call_procedure(
    spark: SparkSession, table: TableIdentifier, procedure: str, args: dict[str, str]
) -> list[dict[str, Any]]:
    """Run the procedure and return its output rows as dicts (on Spark Connect, from the call's own answer:
    ``spark/connect/command.py``)."""
    from airflow_tablemgmt.spark.connect.policy import is_remote

    sql = procedure_sql(table, procedure, args)
    log.info("%s", sql)
    if is_remote(spark):
        from airflow_tablemgmt.spark.connect.command import command_rows

        return command_rows(spark, sql)
    return [row.asDict(recursive=True) for row in spark.sql(sql).collect()]
