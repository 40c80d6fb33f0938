"""When an action runs: intervals (duration or cron), trigger strategies, dynamic-table freshness."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from airflow_tablemgmt.core.errors import InvalidDeclaration, InvalidFreshness

_UNITS = {
    "s": "seconds",
    "sec": "seconds",
    "second": "seconds",
    "seconds": "seconds",
    "m": "minutes",
    "min": "minutes",
    "minute": "minutes",
    "minutes": "minutes",
    "h": "hours",
    "hour": "hours",
    "hours": "hours",
    "d": "days",
    "day": "days",
    "days": "days",
}
_DURATION = re.compile(r"\s*([+-]?)\s*(\d+)\s*([A-Za-z]+)\s*")
_BARE_NUMBER = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)\s*")
# Far beyond any retention a team means, and far inside what date arithmetic can take:
# ``now - 999999999d`` raises OverflowError where a run computes its cutoff.
MAX_DURATION = timedelta(days=36500)
BARE_NUMBER_HINT = "a duration needs its unit, e.g. '30d' (days), '12h', '90m' or '45s'"
_CRON_FIELD = re.compile(r"^[\d*/,\-A-Za-z?LW#]+$")
_CRON_ALIASES = {"@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight"}
INTERVAL_RULE = (
    "a duration such as '30 minutes', '6h', '1 day' (minimum 1 minute) "
    "or a 5-field cron such as '0 3 * * *' or an alias such as '@daily'"
)


def is_bare_number(value: object) -> bool:
    """A number without a unit (``30``, ``1.5``, ``"30"``): never read as seconds, always an error."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, str) and _BARE_NUMBER.fullmatch(value) is not None


def parse_duration(text: str) -> timedelta | None:
    """'6h', '30 MINUTE', '1 day', '-1d' -> timedelta; None if ``text`` is not a duration.

    Raises ``ValueError`` (without a field name; callers add it) when the amount is beyond
    :data:`MAX_DURATION`, instead of the ``OverflowError`` timedelta would raise.
    """
    m = _DURATION.fullmatch(text)
    if not m:
        return None
    unit = _UNITS.get(m.group(3).lower())
    if unit is None:
        return None
    digits = m.group(2)
    too_large = f"{text.strip()!r} is too large; at most {MAX_DURATION.days}d"
    if len(digits) > 12:  # also keeps int() away from its digit limit
        raise ValueError(too_large)
    try:
        value = timedelta(**{unit: int(digits)})
    except OverflowError:
        raise ValueError(too_large) from None
    if value > MAX_DURATION:
        raise ValueError(too_large)
    return -value if m.group(1) == "-" else value


def is_cron(text: str) -> bool:
    """Whether ``text`` looks like a 5-field cron expression or a cron alias."""
    text = text.strip()
    if text in _CRON_ALIASES:
        return True
    fields = text.split()
    return len(fields) == 5 and all(_CRON_FIELD.match(f) for f in fields)


@lru_cache(maxsize=1024)
def _cron_problem(cron: str) -> str | None:
    """What Airflow's cron timetables would say about ``cron`` when they build the schedule, or None.

    The same rules they apply (``airflow.timetables._cron``): croniter must parse the expression
    (ranges included: minute 0-59, hour 0-23, day 1-31, month 1-12, weekday 0-7), it must have 5
    fields, and it must fire at all (``0 0 31 2 *`` never does: croniter fails on its next time).
    """
    from datetime import UTC, datetime

    from croniter import CroniterBadCronError, CroniterBadDateError, croniter

    try:
        it = croniter(cron, datetime(2025, 1, 1, tzinfo=UTC))
        if len(it.expanded) > 5:
            return "it has more than 5 fields"
        it.get_next(datetime)
    except CroniterBadDateError:
        return "it never fires"
    except (CroniterBadCronError, ValueError, KeyError) as e:
        return str(e).strip() or type(e).__name__
    return None


def check_cron(cron: str, field: str = "interval") -> None:
    """:class:`InvalidDeclaration` unless ``cron`` builds a schedule (see :func:`_cron_problem`)."""
    problem = _cron_problem(cron)
    if problem is not None:
        raise InvalidDeclaration(
            f"{field}: cron {cron!r} is not a valid schedule ({problem}); a cron has 5 fields: minute 0-59, "
            "hour 0-23, day of month 1-31, month 1-12 or JAN-DEC, day of week 0-7 or SUN-SAT "
            "(e.g. '0 3 * * *'), or an alias such as @daily"
        )


@lru_cache(maxsize=1024)
def _cron_min_spacing(cron: str) -> timedelta:
    from datetime import UTC, datetime

    from croniter import croniter

    it = croniter(cron, datetime(2025, 1, 1, tzinfo=UTC))
    times = [it.get_next(datetime) for _ in range(65)]
    return min(b - a for a, b in zip(times, times[1:], strict=False))


@dataclass(frozen=True)
class Interval:
    """How often an action runs: exactly one of ``cron`` or ``every``."""

    cron: str | None = None
    every: timedelta | None = None

    @classmethod
    def parse(cls, text: str | timedelta, field: str = "interval") -> Interval:
        every: timedelta | None
        if isinstance(text, timedelta):
            every = text
        elif is_bare_number(text):
            raise InvalidDeclaration(
                f"{field}: {text!r} has no unit; {BARE_NUMBER_HINT}; allowed: {INTERVAL_RULE}"
            )
        elif not isinstance(text, str):
            raise InvalidDeclaration(f"{field}: {text!r} is not an interval; allowed: {INTERVAL_RULE}")
        else:
            if is_cron(text):
                check_cron(text.strip(), field)
                return cls(cron=text.strip())
            try:
                every = parse_duration(text)
            except ValueError as e:
                raise InvalidDeclaration(f"{field}: {e}; allowed: {INTERVAL_RULE}") from None
            if every is None:
                raise InvalidDeclaration(f"{field}: {text!r} is not an interval; allowed: {INTERVAL_RULE}")
        if every <= timedelta(0):
            raise InvalidDeclaration(f"{field}: {text!r} is not positive; allowed: {INTERVAL_RULE}")
        if every < timedelta(minutes=1):
            raise InvalidDeclaration(f"{field}: {text!r} is shorter than 1 minute; allowed: {INTERVAL_RULE}")
        return cls(every=every)

    def min_spacing(self) -> timedelta:
        """The shortest time between two runs: the duration, or the smallest gap between a cron's
        next 64 fire times (UTC, from a fixed start so the answer does not depend on today)."""
        if self.every is not None:
            return self.every
        assert self.cron is not None
        return _cron_min_spacing(self.cron)

    def __str__(self) -> str:
        if self.cron is not None:
            return self.cron
        assert self.every is not None
        secs = int(self.every.total_seconds())
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if secs % size == 0:
                return f"{secs // size}{unit}"
        return f"{secs}s"


@dataclass(frozen=True)
class TriggerStrategy:
    """How a factory wants an action scheduled (after Amoro's process-factory trigger strategy).

    ``parallelism`` bounds the concurrent runs of that action across tables (one pool per
    action and queue) and per DAG.
    """

    interval: Interval
    on_new_snapshot: bool = False
    parallelism: int = 1

    def __post_init__(self) -> None:
        if self.parallelism < 1:
            raise InvalidDeclaration(f"parallelism: must be >= 1, got {self.parallelism}")


# "5 MINUTE", "5 minutes", "5MIN" and Flink's SQL spelling "INTERVAL '5' MINUTE".
_FRESHNESS = re.compile(
    r"\s*(?:INTERVAL\s+'\s*([0-9]+)\s*'|INTERVAL\s+([0-9]+)|([0-9]+))\s*(SECOND|MINUTE|HOUR|DAY)S?\s*",
    re.IGNORECASE,
)
_DOWNSTREAM = "DOWNSTREAM"
# Flink's full-refresh rule: the freshness must fit a cron that fires at the same wall-clock
# positions every period, i.e. a factor of 60 minutes, a factor of 24 hours, or exactly one day.
FRESHNESS_ALLOWED = {
    "MINUTE": tuple(n for n in range(1, 61) if 60 % n == 0),
    "HOUR": tuple(n for n in range(1, 25) if 24 % n == 0),
    "DAY": (1,),
}
FRESHNESS_RULE = (
    "'N MINUTE' with N dividing 60 (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60), "
    "'N HOUR' with N dividing 24 (1, 2, 3, 4, 6, 8, 12, 24), '1 DAY' "
    "(also written INTERVAL '5' MINUTE), or 'downstream' (refresh after each refresh of its upstream "
    "dynamic tables)"
)
_DELTA_UNITS = {"MINUTE": "minutes", "HOUR": "hours", "DAY": "days"}


@dataclass(frozen=True)
class Freshness:
    """A dynamic table's freshness (FLIP-435), e.g. ``5 MINUTE``; converts to a full-refresh cron.

    ``downstream`` (after Snowflake's ``TARGET_LAG = DOWNSTREAM``) has no cron: the table refreshes
    after each successful refresh of the dynamic tables it reads.
    """

    amount: int
    unit: str  # MINUTE | HOUR | DAY | DOWNSTREAM (amount 0)

    @classmethod
    def parse(cls, text: str | Freshness, field: str = "freshness") -> Freshness:
        if isinstance(text, Freshness):
            return text
        if not isinstance(text, str):
            raise InvalidFreshness(f"{field}: {text!r} is not a freshness; allowed: {FRESHNESS_RULE}")
        if text.strip().upper() == _DOWNSTREAM:
            return DOWNSTREAM
        m = _FRESHNESS.fullmatch(text)
        if not m:
            raise InvalidFreshness(f"{field}: {text!r} is not a freshness; allowed: {FRESHNESS_RULE}")
        digits = m.group(1) or m.group(2) or m.group(3)
        unit = m.group(4).upper()
        if unit == "SECOND":
            raise InvalidFreshness(
                f"{field}: {text!r} cannot be a full-refresh cron: Airflow's cron has no seconds field; "
                f"use MINUTE (allowed for MINUTE: {_listed('MINUTE')}); allowed: {FRESHNESS_RULE}"
            )
        allowed = FRESHNESS_ALLOWED[unit]
        amount = int(digits) if len(digits) <= 6 else 0  # a 7-digit amount is never allowed
        if amount not in allowed:
            what = {"MINUTE": "divide 60", "HOUR": "divide 24", "DAY": "be exactly 1"}[unit]
            raise InvalidFreshness(
                f"{field}: {text!r} cannot be a full-refresh cron: a freshness in {unit}S must {what}; "
                f"allowed for {unit}: {_listed(unit)}"
            )
        return cls(amount, unit)

    @property
    def is_downstream(self) -> bool:
        return self.unit == _DOWNSTREAM

    @property
    def delta(self) -> timedelta:
        """The period as a duration (0 for ``downstream``)."""
        if self.is_downstream:
            return timedelta(0)
        return timedelta(**{_DELTA_UNITS[self.unit]: self.amount})

    def to_cron(self) -> str | None:
        """The full-refresh cron (UTC), or None for ``downstream``."""
        if self.is_downstream:
            return None
        if self.unit == "MINUTE" and self.amount < 60:
            return "* * * * *" if self.amount == 1 else f"*/{self.amount} * * * *"
        if self.unit == "MINUTE" or (self.unit == "HOUR" and self.amount == 1):
            return "0 * * * *"
        if self.unit == "HOUR" and self.amount < 24:
            return f"0 */{self.amount} * * *"
        return "0 0 * * *"

    def __str__(self) -> str:
        return _DOWNSTREAM if self.is_downstream else f"{self.amount} {self.unit}"


DOWNSTREAM = Freshness(0, _DOWNSTREAM)


def _listed(unit: str) -> str:
    return ", ".join(str(n) for n in FRESHNESS_ALLOWED[unit])
