"""Table formats the service knows how to maintain."""

from __future__ import annotations

from enum import StrEnum


class TableFormat(StrEnum):
    """A lakehouse table format."""

    ICEBERG = "iceberg"
    DELTA = "delta"
    HUDI = "hudi"
