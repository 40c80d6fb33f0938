"""The instant a user may ask a run for (REST ``POST …/actions/{action}/runs``, ``tablemgmt run``).

An instant is the process key and the DAG run's logical date. Airflow never starts a run whose logical
date lies in the future, and with one active run per DAG such a run blocks every later run of the
action; a date before the DAG's start is one Airflow's scheduler never meant. So a run-now instant is:

* text in ISO 8601 *with* a time zone (``2026-02-01T00:00:00+00:00`` or ``…Z``), or a tz-aware
  ``datetime``; a number (``-1615`` would read as a Unix time in 1969), a boolean or a naive time is
  refused, naming the field, the value and what is allowed;
* within ``[DAG_START_DATE, now + RUN_SKEW]``: a small skew allows clocks a little ahead.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_tablemgmt.core.errors import InvalidDeclaration

# dag_factory.START_DATE (the start date of every generated DAG); tests/unit hold the two equal.
DAG_START_DATE = datetime(2024, 1, 1, tzinfo=UTC)
RUN_SKEW = timedelta(minutes=5)
EXAMPLE = "2026-02-01T00:00:00+00:00"


class InvalidInstant(InvalidDeclaration):
    """A run-now instant that is not a tz-aware ISO 8601 time within the allowed window."""


def allowed_window(now: datetime | None = None) -> str:
    latest = (now or datetime.now(UTC)) + RUN_SKEW
    return (
        f"allowed: an ISO 8601 time with a time zone between {DAG_START_DATE.isoformat()} (the DAG's start "
        f"date) and {latest.replace(microsecond=0).isoformat()} (now + {int(RUN_SKEW.total_seconds() // 60)} "
        f"minutes), e.g. {EXAMPLE}"
    )


def check_run_instant(value: Any, field: str = "instant", now: datetime | None = None) -> datetime:
    """``value`` as a UTC instant to the second, or :class:`InvalidInstant` (see the module)."""
    now = now or datetime.now(UTC)
    if isinstance(value, datetime):
        instant = value
    elif isinstance(value, str):
        try:
            instant = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidInstant(
                f"{field}: {value!r} is not an ISO 8601 time; {allowed_window(now)}"
            ) from None
    else:
        kind = (
            "a number"
            if isinstance(value, int | float) and not isinstance(value, bool)
            else type(value).__name__
        )
        raise InvalidInstant(f"{field}: {value!r} is {kind}, not a time; {allowed_window(now)}")
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise InvalidInstant(
            f"{field}: {_shown(value)} has no time zone (add one, e.g. +00:00); {allowed_window(now)}"
        )
    instant = instant.astimezone(UTC).replace(microsecond=0)
    if instant < DAG_START_DATE:
        raise InvalidInstant(
            f"{field}: {_shown(value)} is before the DAG's start date; {allowed_window(now)}"
        )
    if instant > now + RUN_SKEW:
        raise InvalidInstant(
            f"{field}: {_shown(value)} is in the future (Airflow would never start its run); {allowed_window(now)}"
        )
    return instant


def _shown(value: Any) -> str:
    return repr(value.isoformat()) if isinstance(value, datetime) else repr(value)
