"""Java / Flink date patterns (``yyyy-MM-dd``, ``HH``...) compiled to Python, and Flink's partition
rule: the value refreshed at ``scheduleTime`` is ``format(scheduleTime - freshness)`` in the table's
time zone."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.triggers import Freshness

# letter -> (what it is, the widths supported)
_PATTERN_LETTERS = {
    "y": ("year", (1, 2, 4)),
    "M": ("month 01-12", (1, 2)),
    "d": ("day of month", (1, 2)),
    "H": ("hour 00-23", (1, 2)),
    "m": ("minute", (1, 2)),
    "s": ("second", (1, 2)),
}
PATTERN_RULE = (
    "Java date-pattern letters y (year: yyyy, yy), M (month: MM, M), d (day: dd, d), H (hour 0-23: HH, H), "
    "m (minute: mm, m), s (second: ss, s); other letters must be quoted ('T'); "
    "e.g. yyyy-MM-dd, yyyyMMdd, HH, yyyy-MM-dd HH"
)


class DateFormatter:
    """A Java ``DateTimeFormatter`` pattern as Flink's ``partition.fields.#.date-formatter`` takes it.

    Letters ``y M d H m s`` (repeated for zero padding; ``yy`` is the two-digit year), quoted
    literals (``'T'``, ``''`` for a quote) and any non-letter character as itself.
    """

    def __init__(self, pattern: str, field: str = "date-formatter") -> None:
        self.pattern = pattern
        self._parts = _compile_pattern(pattern, field)

    def format(self, value: datetime) -> str:
        out = []
        for kind, arg in self._parts:
            if kind == "lit":
                out.append(arg)
                continue
            letter, width = arg[0], len(arg)
            number = {
                "y": value.year,
                "M": value.month,
                "d": value.day,
                "H": value.hour,
                "m": value.minute,
                "s": value.second,
            }[letter]
            if letter == "y" and width == 2:
                number %= 100
            out.append(str(number).zfill(width))
        return "".join(out)

    def __repr__(self) -> str:
        return f"DateFormatter({self.pattern!r})"


def _compile_pattern(pattern: str, field: str) -> list[tuple[str, str]]:
    if not isinstance(pattern, str) or not pattern.strip():
        raise InvalidDeclaration(f"{field}: {pattern!r} is not a date pattern; allowed: {PATTERN_RULE}")
    parts: list[tuple[str, str]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            end = i + 1
            text = []
            while True:
                if end >= n:
                    raise InvalidDeclaration(
                        f"{field}: {pattern!r} has an unterminated quote; allowed: {PATTERN_RULE}"
                    )
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            parts.append(("lit", "".join(text) if end > i + 1 else "'"))
            i = end + 1
        elif c.isascii() and c.isalpha():
            j = i
            while j < n and pattern[j] == c:
                j += 1
            run = pattern[i:j]
            if c not in _PATTERN_LETTERS:
                raise InvalidDeclaration(
                    f"{field}: {pattern!r} uses {run!r}, which is not supported; allowed: {PATTERN_RULE}"
                )
            what, widths = _PATTERN_LETTERS[c]
            if len(run) not in widths:
                raise InvalidDeclaration(
                    f"{field}: {pattern!r} uses {run!r} ({what}); allowed widths for {c!r}: "
                    f"{', '.join(c * w for w in widths)}"
                )
            parts.append(("num", run))
            i = j
        elif c.isalpha() or not c.isprintable():
            raise InvalidDeclaration(
                f"{field}: {pattern!r} has {c!r}, which is not allowed; allowed: {PATTERN_RULE}"
            )
        else:
            parts.append(("lit", c))
            i += 1
    if not any(kind == "num" for kind, _ in parts):
        raise InvalidDeclaration(f"{field}: {pattern!r} has no date letters; allowed: {PATTERN_RULE}")
    return parts


def zone(time_zone: str, field: str = "time-zone") -> ZoneInfo:
    """An IANA time zone, or an error naming the field."""
    try:
        if not isinstance(time_zone, str) or not time_zone or time_zone != time_zone.strip():
            raise ValueError(time_zone)
        return ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidDeclaration(
            f"{field}: {time_zone!r} is not an IANA time zone; e.g. UTC, Europe/Berlin, America/New_York, "
            "Asia/Shanghai"
        ) from None


def partition_values(
    schedule_time: datetime,
    freshness: Freshness | str | timedelta,
    formatters: Mapping[str, str | DateFormatter],
    time_zone: str = "UTC",
) -> dict[str, str]:
    """The partition each formatted column refreshes at ``schedule_time``: ``format(scheduleTime -
    freshness)`` in ``time_zone`` (Flink's rule), i.e. the last complete period.

    An aware ``schedule_time`` (an Airflow logical date) is converted to ``time_zone`` first; a naive
    one is read as wall-clock time in ``time_zone`` (as Flink reads the REST ``scheduleTime`` string;
    a wall-clock time that a DST change repeats is its first occurrence, one it skips is read with the
    offset before the change). Sub-day periods are subtracted on the absolute time line, for naive
    inputs too (so each hour of a DST change has its own value, the skipped hour is never produced and
    the repeated one is); a day is subtracted on the wall clock (local midnight minus one day is the
    previous local midnight, also across DST changes).
    """
    tz = zone(time_zone)
    delta = freshness if isinstance(freshness, timedelta) else Freshness.parse(freshness).delta
    if schedule_time.tzinfo is None:
        schedule_time = schedule_time.replace(tzinfo=tz)  # wall clock in the table's zone, as Flink
    if delta % timedelta(days=1) == timedelta(0):
        moment = schedule_time.astimezone(tz).replace(tzinfo=None) - delta
    else:
        # In UTC: arithmetic on a datetime aware in a DST zone would be wall-clock arithmetic.
        moment = (schedule_time.astimezone(UTC) - delta).astimezone(tz).replace(tzinfo=None)
    return {
        col: (
            f if isinstance(f, DateFormatter) else DateFormatter(f, f"partition-fields.{col}.date-formatter")
        ).format(moment)
        for col, f in formatters.items()
    }
