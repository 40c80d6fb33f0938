"""A pydantic type for durations written the way people write them in YAML: '3d', '24 hours'.

A duration always carries its unit. A bare number is an error, never "seconds": ``retention: 30``
(or ``--set expire-data.retention=30``, which YAML reads as the int 30) meant 30 days far more
often than 30 seconds, and read as seconds it deletes almost everything.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

from airflow_tablemgmt.core.triggers import (
    BARE_NUMBER_HINT,
    MAX_DURATION,
    Interval,
    is_bare_number,
    parse_duration,
)

DURATION_RULE = (
    f"a positive duration with a unit such as '30d', '24h' or '24 hours', '90m', '45s' "
    f"(at most {MAX_DURATION.days}d)"
)


def to_timedelta(value: Any) -> timedelta:
    """Validate one duration value; ``ValueError`` messages leave the field name to the caller."""
    if isinstance(value, timedelta):
        parsed = value
    elif is_bare_number(value):
        raise ValueError(f"{value!r} has no unit; {BARE_NUMBER_HINT}")
    elif isinstance(value, str):
        maybe = parse_duration(value)  # ValueError when too large
        if maybe is None:
            raise ValueError(f"expected {DURATION_RULE}, got {value!r}")
        parsed = maybe
    else:
        raise ValueError(f"expected {DURATION_RULE}, got {value!r}")
    if parsed <= timedelta(0):
        # A zero or negative age would put a cutoff at (or after) now: everything qualifies.
        raise ValueError(f"{value!r} is not positive; expected {DURATION_RULE}")
    if parsed > MAX_DURATION:
        raise ValueError(f"{value!r} is too large; at most {MAX_DURATION.days}d")
    if parsed % timedelta(seconds=1):
        raise ValueError(f"{value!r} is not a whole number of seconds; expected {DURATION_RULE}")
    return parsed


def format_duration(value: timedelta) -> str:
    """The shortest exact text with a unit: '3d', '36h', '90m', '45s' (reads back to ``value``)."""
    return str(Interval(every=value))


Duration = Annotated[
    timedelta, BeforeValidator(to_timedelta), PlainSerializer(format_duration, return_type=str)
]
