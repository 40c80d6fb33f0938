"""A refresh request, written down once: the process parameters and DAG-run conf a REST or CLI
refresh carries, the one schedule-time format (FLIP-435's ``yyyy-MM-dd HH:mm:ss``, UTC) and its one
parser, and how a refresh task reads its DAG run into process parameters.

Light on purpose: the lifecycle's factory imports it when it runs a refresh, without the model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_tablemgmt.core.actions import REFRESH as REFRESH_ACTION

REFRESH = REFRESH_ACTION.name  # the action's name, defined once (core.actions)

SCHEDULE_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_SCHEDULE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")

# What started a refresh (the values of ``spec.RefreshTrigger``), and the DAG-run conf keys of a request.
SCHEDULED, MANUAL, CREATION = "SCHEDULED", "MANUAL", "CREATION"
CONF_KEYS = ("trigger", "is_periodic", "schedule_time", "static_partitions", "dynamic_options")


def parse_schedule_time(value: str | datetime | None, field: str = "scheduleTime") -> datetime | None:
    """FLIP-435's ``yyyy-MM-dd HH:mm:ss`` (UTC); ISO 8601 is accepted too; an aware UTC time to the
    second. None stays None. A value that is no time raises ValueError naming ``field``."""
    if value is None or isinstance(value, datetime):
        if isinstance(value, datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).replace(microsecond=0) if value else None
    text = str(value).strip()
    try:
        if _SCHEDULE_TIME.match(text):
            parsed = datetime.strptime(text, SCHEDULE_TIME_FORMAT)
        else:
            parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{field}: {value!r} is not a time; expected yyyy-MM-dd HH:mm:ss, e.g. 2026-02-01 00:00:00"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).replace(microsecond=0)


def format_schedule_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime(SCHEDULE_TIME_FORMAT)


def requested_trigger(state: str) -> str:
    """The trigger of a refresh a user asks for (CLI, REST): a table still CREATING is created by it
    (``CREATION``, as :func:`run_parameters` records a DAG run on such a table), any other is ``MANUAL``."""
    return CREATION if str(state) == "CREATING" else MANUAL


def refresh_parameters(
    trigger: str,
    is_periodic: bool,
    schedule_time: datetime,
    static_partitions: Mapping[str, Any] | None,
    dynamic_options: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The process ``parameters`` (and the DAG run's conf) of a refresh. A creation is never periodic:
    it writes the whole table."""
    if str(trigger) == CREATION:
        is_periodic = False
    return {
        "trigger": str(trigger),
        "is_periodic": bool(is_periodic),
        "schedule_time": format_schedule_time(schedule_time),
        "static_partitions": {str(k): str(v) for k, v in (static_partitions or {}).items()},
        "dynamic_options": dict(dynamic_options or {}),
    }


def refresh_conf(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The DAG-run conf that carries a refresh's parameters to its task (:func:`run_parameters`)."""
    return {k: parameters[k] for k in CONF_KEYS}


def run_parameters(
    state: str, conf: Mapping[str, Any] | None, run_type: str | None, instant: datetime
) -> dict[str, Any]:
    """A refresh task's process parameters from its DAG run: the conf a REST/CLI refresh put there
    (trigger, is_periodic, schedule_time, static_partitions, dynamic_options), else the run's own kind
    (a scheduled or upstream-asset run is a periodic SCHEDULED refresh at its logical date; a run
    triggered by hand without conf is a manual full refresh). A table still CREATING is created by
    this run (trigger CREATION), whatever started it."""
    conf = dict(conf or {})
    default_trigger = SCHEDULED if run_type in (None, "scheduled", "asset_triggered", "backfill") else MANUAL
    trigger = str(conf.get("trigger") or default_trigger).upper()
    is_periodic = bool(conf.get("is_periodic", trigger == SCHEDULED))
    if state == "CREATING":
        trigger, is_periodic = CREATION, False
    schedule_time = conf.get("schedule_time") or format_schedule_time(instant)
    return {
        "trigger": trigger,
        "is_periodic": is_periodic,
        "schedule_time": str(schedule_time),
        "static_partitions": {str(k): str(v) for k, v in dict(conf.get("static_partitions") or {}).items()},
        "dynamic_options": dict(conf.get("dynamic_options") or {}),
    }


def trigger_of(parameters: Mapping[str, Any]) -> str:
    """What started the refresh a process records (a process without one was scheduled)."""
    return str(parameters.get("trigger") or SCHEDULED)


def schedule_time_of(parameters: Mapping[str, Any], fallback: datetime) -> datetime:
    """The schedule time a refresh process records, else ``fallback`` (its instant)."""
    return parse_schedule_time(parameters.get("schedule_time") or None) or fallback
