"""Time as the store sees it: aware UTC, always."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime, field: str) -> datetime:
    """``value`` in UTC; a naive datetime is refused, naming ``field``."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{field}: naive datetime {value.isoformat()} refused; pass an aware datetime (UTC)")
    return value.astimezone(UTC)
