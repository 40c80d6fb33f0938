"""The toyparquet health and Files view: the directory's files, read without a JVM."""

from __future__ import annotations

from typing import Any

from airflow_tablemgmt.formats.api import Finding, FormatHealth, LiveFile, files_view
from toyparquet.files import parquet_files


def _location(catalog: Any, table: Any) -> str:
    return f"{catalog.warehouse.rstrip('/')}/{table.namespace.replace('.', '/')}/{table.name}"


def table_health(catalog: Any, table: Any) -> FormatHealth:
    files = parquet_files(_location(catalog, table))
    findings = (
        (Finding("many_files", 25, "compact", f"{len(files)} Parquet files"),) if len(files) > 2 else ()
    )
    return FormatHealth("toyparquet", {"data_files": len(files)}, findings)


def read_files(catalog: Any, table: Any) -> dict[str, Any]:
    files = [LiveFile(p.name, "", p.stat().st_size) for p in parquet_files(_location(catalog, table))]
    return files_view(files, 128 * 1024 * 1024, compaction_action="compact")
