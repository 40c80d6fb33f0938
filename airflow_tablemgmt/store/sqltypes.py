"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Integer
from sqlalchemy.types import TypeDecorator, TypeEngine


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp that goes in and comes out as an aware UTC ``datetime``.

    PostgreSQL stores it as ``timestamptz``. SQLite has no time zones and SQLAlchemy's SQLite
    ``DATETIME`` silently drops ``tzinfo``, so there the value is stored as naive UTC text and
    re-labelled UTC when read. Naive datetimes are refused on the way in: a naive value is local
    time on some machine, and guessing which one is how timestamps drift by hours.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}: {value!r}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} refused: pass an aware datetime (UTC)")
        # Rebuild as a plain datetime: subclasses (pendulum's) are not adapted by every driver.
        utc = value.astimezone(UTC)
        tz = None if dialect.name == "sqlite" else UTC
        return datetime(utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond, tz)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # a value written by hand, or by a raw SQL statement
            value = datetime.fromisoformat(value)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class JsonDocument(TypeDecorator[Any]):
    """JSON on SQLite, JSONB on PostgreSQL; Python ``None`` is stored as SQL NULL, not JSON ``null``.

    What ``JSON().with_variant(JSONB(), "postgresql")`` declares, except that PostgreSQL's dialect
    package (JSONB's home, with every PostgreSQL driver's dialect module) is imported only when a
    PostgreSQL connection asks for the type: a process on a SQLite store never pays for it.
    """

    impl = JSON
    cache_ok = True

    def __init__(self) -> None:
        super().__init__(none_as_null=True)

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB(none_as_null=True))
        return dialect.type_descriptor(JSON(none_as_null=True))


def json_document() -> TypeEngine[Any]:
    """A JSON document column's type (see :class:`JsonDocument`)."""
    return JsonDocument()


def big_id() -> TypeEngine[int]:
    """A 64-bit surrogate key that still auto-increments on SQLite (only INTEGER PRIMARY KEY does)."""
    return BigInteger().with_variant(Integer(), "sqlite")
