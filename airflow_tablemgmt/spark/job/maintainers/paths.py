"""A path-based table's location as the job receives it (the factory's ``table-location`` option), checked
before it reaches Spark SQL as a backtick-quoted path (``delta.`<path>```, Hudi's ``path => '<path>'``)."""

from __future__ import annotations

from typing import Any

from airflow_tablemgmt.core.formats import TABLE_LOCATION_OPTION
from airflow_tablemgmt.spark.errors import InvalidJobSpec


def take_location(options: dict[str, Any], action: str) -> str:
    """Remove and return the table's location from ``options`` (the settings models forbid the key)."""
    location = options.pop(TABLE_LOCATION_OPTION, None)
    if not isinstance(location, str) or not location:
        raise InvalidJobSpec(f"{action}.{TABLE_LOCATION_OPTION}: the job spec names no table location")
    if any(c in location for c in "`'\\\n\r\0"):
        raise InvalidJobSpec(
            f"{action}.{TABLE_LOCATION_OPTION}: {location!r} contains a quote, backslash or control character"
        )
    return location
