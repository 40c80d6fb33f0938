"""SQL literals built from values, never from pasted text. Identifiers go through ``core.identifiers.quote``.

Spark SQL (and Iceberg's CALL parser) unescape backslash sequences inside string literals, and
they *concatenate* adjacent literals: ``'it''s'`` reads as ``'it' 's'`` = ``its``. So a quote is
escaped as ``\\'`` and a backslash as ``\\\\``, which round-trips any text exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime


def string(value: str) -> str:
    """A Spark SQL string literal holding exactly ``value``."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def boolean(value: bool) -> str:
    return "true" if value else "false"


def integer(value: int) -> str:
    return str(int(value))


def string_map(entries: Mapping[str, object]) -> str:
    """``map('k1', 'v1', ...)`` as Iceberg procedures take their ``options``."""
    parts = []
    for key, value in entries.items():
        text = boolean(value) if isinstance(value, bool) else str(value)
        parts += [string(key), string(text)]
    return f"map({', '.join(parts)})"


def string_array(values: Iterable[str]) -> str:
    return f"array({', '.join(string(v) for v in values)})"


def timestamp(moment: datetime) -> str:
    """A ``TIMESTAMP`` literal with an explicit UTC offset, so the session time zone cannot shift it."""
    if moment.tzinfo is None:
        raise ValueError("timestamp literal needs an aware datetime")
    utc = moment.astimezone(UTC)
    return f"TIMESTAMP '{utc.strftime('%Y-%m-%d %H:%M:%S.%f')}Z'"


def timestamp_ntz(moment: datetime) -> str:
    """A ``TIMESTAMP_NTZ`` literal of the UTC wall-clock time of ``moment``."""
    utc = moment.astimezone(UTC) if moment.tzinfo is not None else moment
    return f"TIMESTAMP_NTZ '{utc.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def date_literal(day: date) -> str:
    return f"DATE '{day.isoformat()}'"
