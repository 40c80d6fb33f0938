"""A pydantic type for durations written the way people write them in YAML: '3d', '24 hours'."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

from airflow_tablemgmt.core.triggers import Interval, parse_duration

DURATION_RULE = "a duration such as '90m', '24 hours', '3d' or a number of seconds"


def _to_timedelta(value: Any) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"expected {DURATION_RULE}, got {value!r}")
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    if isinstance(value, str):
        parsed = parse_duration(value)
        if parsed is not None:
            return parsed
    raise ValueError(f"expected {DURATION_RULE}, got {value!r}")


def _format(value: timedelta) -> str:
    return str(Interval(every=value)) if value >= timedelta(minutes=1) else f"{int(value.total_seconds())}s"


Duration = Annotated[timedelta, BeforeValidator(_to_timedelta), PlainSerializer(_format, return_type=str)]
