"""The toyparquet factory: everything but "does a compaction pay" comes from the descriptor."""

from __future__ import annotations

from typing import Any

from airflow_tablemgmt.formats.api import TABLE_LOCATION_OPTION, FormatFactory, TableSpec, TriggerContext
from toyparquet.files import parquet_files


class ToyParquetFactory(FormatFactory):
    format = "toyparquet"

    def refusal(self, table: TableSpec, action: str, context: TriggerContext) -> str | None:
        return None  # no root marker to check: any directory of Parquet files is a table

    def plan(
        self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any] | None:
        location = self.job(table, action, options, context).options[TABLE_LOCATION_OPTION]
        return options if len(parquet_files(location)) > int(options["min-files"]) else None
