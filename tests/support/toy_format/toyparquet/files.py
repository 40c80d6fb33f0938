"""The table's Parquet files on disk, read without a JVM."""

from __future__ import annotations

from pathlib import Path

from airflow_tablemgmt.formats.api import HealthUnavailable


def parquet_files(location: str) -> list[Path]:
    root = Path(location.removeprefix("file:"))
    if not root.is_dir():
        raise HealthUnavailable(f"{location}: not a local directory")
    return sorted(p for p in root.glob("*.parquet") if p.is_file())
