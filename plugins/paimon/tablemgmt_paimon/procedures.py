"""The ``CALL`` statements of Paimon 0.9's Spark procedures, built from validated options (no Spark here:
the unit tests check them as text). Named arguments, as Paimon 0.9 declares them:

- ``sys.compact(table, partitions, order_strategy, order_by, where, options, partition_idle_time)``
  (``options``: table options for this call, e.g. ``commit.user-prefix``, which starts the commit's user)
- ``sys.expire_snapshots(table, retain_max, retain_min, older_than, max_deletes)``
- ``sys.expire_partitions(table, expiration_time, timestamp_formatter, timestamp_pattern, expire_strategy)``
- ``sys.remove_orphan_files(table, older_than, dry_run)``

``expire_snapshots``' ``older_than`` is a Spark ``TIMESTAMP`` (rendered in UTC with its offset);
``remove_orphan_files``' is a string (``yyyy-MM-dd HH:mm:ss``) that Paimon parses in the JVM's default time
zone: that cutoff is rendered in the driver's local time, the same zone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

_UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


@dataclass(frozen=True)
class Sql:
    """An argument rendered as is (built here from validated values only)."""

    text: str


def literal(value: str) -> str:
    if any(c in value for c in "'\\\n\r\0"):
        raise ValueError(f"{value!r} contains a quote, backslash or control character")
    return f"'{value}'"


def paimon_duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    for size, unit in _UNITS:
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    raise AssertionError("unreachable")


def cutoff(older_than: timedelta, now: datetime | None = None) -> str:
    """The local timestamp ``older_than`` ago, as Paimon's ``older_than`` argument."""
    return ((now or datetime.now()) - older_than).strftime("%Y-%m-%d %H:%M:%S")


def utc_timestamp(older_than: timedelta, now: datetime | None = None) -> Sql:
    """A ``TIMESTAMP`` literal ``older_than`` ago, with its offset (independent of the session's zone)."""
    at = (now or datetime.now(UTC)).astimezone(UTC) - older_than
    return Sql(f"TIMESTAMP '{at.strftime('%Y-%m-%d %H:%M:%S')}+00:00'")


def call(catalog: str, procedure: str, args: dict[str, Any]) -> str:
    rendered = []
    for name, value in args.items():
        if value is None:
            continue
        if isinstance(value, Sql):
            rendered.append(f"{name} => {value.text}")
        elif isinstance(value, bool):
            rendered.append(f"{name} => {'true' if value else 'false'}")
        elif isinstance(value, int):
            rendered.append(f"{name} => {value}")
        else:
            rendered.append(f"{name} => {literal(str(value))}")
    return f"CALL `{catalog}`.sys.{procedure}({', '.join(rendered)})"


def compact_sql(catalog: str, table: str, options: dict[str, Any], commit_user: str | None = None) -> str:
    """``sys.compact``; with ``commit_user``, its commit's user starts with it (Paimon's
    ``commit.user-prefix``, a table option the procedure's ``options`` set for this call only): the
    snapshot names the process attempt that committed it (recovery reads it, ``factory.commit_marks``)."""
    strategy = options.get("order-strategy") or "none"
    partitions = ",".join(f"{k}={v}" for k, v in (options.get("partition-filter") or {}).items())
    return call(
        catalog,
        "compact",
        {
            "table": table,
            "partitions": partitions or None,
            "order_strategy": strategy if strategy != "none" else None,
            "order_by": ",".join(options.get("order-by") or []) or None,
            "options": f"commit.user-prefix={commit_user}" if commit_user else None,
        },
    )


def expire_snapshots_sql(catalog: str, table: str, options: dict[str, Any], older_than: timedelta) -> str:
    return call(
        catalog,
        "expire_snapshots",
        {
            "table": table,
            "retain_max": options.get("retain-max"),
            "retain_min": options.get("retain-min", 1),
            "older_than": utc_timestamp(older_than),
            "max_deletes": options.get("max-deletes"),
        },
    )


def expire_partitions_sql(catalog: str, table: str, options: dict[str, Any], expiration: timedelta) -> str:
    return call(
        catalog,
        "expire_partitions",
        {
            "table": table,
            "expiration_time": paimon_duration(expiration),
            "timestamp_formatter": options["timestamp-formatter"],
            "timestamp_pattern": options.get("timestamp-pattern"),
            "expire_strategy": options.get("expire-strategy", "values-time"),
        },
    )


def remove_orphans_sql(catalog: str, table: str, older_than: timedelta, dry_run: bool) -> str:
    return call(
        catalog,
        "remove_orphan_files",
        {"table": table, "older_than": cutoff(older_than), "dry_run": dry_run},
    )
