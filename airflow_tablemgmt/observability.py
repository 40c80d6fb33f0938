"""Metrics of table maintenance, sent through Airflow's own ``Stats``.

Whatever Airflow is configured with receives them: StatsD (``[metrics] statsd_on``), DogStatsD, or
OpenTelemetry (``otel_on``); with none configured every call is a no-op. Task processes get Stats
initialized by Airflow's task runner; the ``tablemgmt`` CLI and ``dag.test()`` may not, so the first
emit initializes it from the same configuration when nothing has yet.

Each metric goes out under a *tagged* name (``tablemgmt.process.started`` with tags ``table``,
``action``; OpenTelemetry, DogStatsD and StatsD with InfluxDB tags keep them) and, while Airflow's
``[metrics] legacy_names_on`` is on (its default), also under a name that carries the variables, as
Airflow's own legacy names do, because plain StatsD drops tags: ``tablemgmt.process.started.<action>``,
``tablemgmt.table.data_files.<table>`` (dots of a table id become ``__``, Airflow's rule).

Observability never fails a task: every emit is wrapped, and an error is logged once, not raised.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tablemgmt.core.process import Process
    from airflow_tablemgmt.metadata.files import FileStats

log = logging.getLogger(__name__)

PREFIX = "tablemgmt"
#: Health figures sent as ``tablemgmt.table.<name>`` gauges.
HEALTH_GAUGES = (
    "data_files",
    "small_data_files",
    "small_file_ratio",
    "delete_files",
    "snapshots",
    "data_bytes",
)
#: Keys of a job's summary that count the bytes it rewrote (Iceberg's procedures' result columns).
REWRITTEN_BYTES_KEYS = ("rewritten_bytes_count",)

_state: dict[str, Any] = {"ready": False, "legacy": True, "warned": False}


def reset() -> None:
    """Forget the Stats set-up, so the next emit reads Airflow's configuration again (tests)."""
    _state["ready"] = False
    try:
        from airflow.sdk._shared.observability.metrics import stats as impl

        impl.initialize(factory=_factory(), export_legacy_names=_legacy_names())
    except Exception:  # noqa: BLE001 - observability never fails the caller
        log.debug("tablemgmt: resetting Stats failed", exc_info=True)


def _factory() -> Callable[[], Any]:
    from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

    return get_stats_factory()


def _legacy_names() -> bool:
    from airflow.sdk.configuration import conf

    return conf.getboolean("metrics", "legacy_names_on", fallback=True)


def _stats() -> Any:
    """Airflow's stats module, initialized from ``[metrics]`` when no Airflow component did it."""
    from airflow.sdk.observability import stats

    if not _state["ready"]:
        from airflow.sdk._shared.observability.metrics import stats as impl

        if getattr(impl, "_factory", None) is None:
            impl.initialize(factory=_factory(), export_legacy_names=_legacy_names())
        _state["legacy"] = _legacy_names()
        _state["ready"] = True
    return stats


def _safe(fn: Callable[..., None]) -> Callable[..., None]:
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:  # noqa: BLE001 - observability never fails a task
            if not _state["warned"]:
                _state["warned"] = True
                log.warning(
                    "tablemgmt: sending metrics failed (later failures are not logged)", exc_info=True
                )

    wrapper.__doc__ = fn.__doc__
    wrapper.__name__ = fn.__name__
    return wrapper


def _part(value: str) -> str:
    """A variable as one segment of a StatsD name (Airflow's legacy-name rule: ``.`` -> ``__``)."""
    from airflow.sdk.observability.stats import normalize_name_for_stats

    return normalize_name_for_stats(value.replace(".", "__"), log_warning=False)


def _emit(kind: str, name: str, value: float, tags: dict[str, str], *legacy_vars: str) -> None:
    if not _state["ready"] and "airflow" not in sys.modules:
        from airflow_tablemgmt.hooks.airflow_settings import metrics_may_be_on

        if not metrics_may_be_on():  # Airflow's Stats would be a no-op: do not import Airflow for it
            return
    stats = _stats()
    names = [f"{PREFIX}.{name}"]
    if _state["legacy"] and legacy_vars:
        names.append(".".join([f"{PREFIX}.{name}", *(_part(v) for v in legacy_vars)]))
    for i, stat in enumerate(names):
        t = tags if i == 0 else None
        if kind == "incr":
            stats.incr(stat, count=int(value), tags=t)
        elif kind == "gauge":
            stats.gauge(stat, value, tags=t)
        else:  # timing, in milliseconds
            stats.timing(stat, value, tags=t)


def _num(v: Any) -> float | None:
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


@_safe
def process_started(process: Process) -> None:
    """A process attempt claimed its run (PENDING -> SUBMITTED)."""
    tags = {"table": process.table_id, "action": process.action}
    _emit("incr", "process.started", 1, tags, process.action)


@_safe
def process_finished(process: Process, duration_s: float) -> None:
    """A process attempt ended: SUCCESS, FAILED, KILLED or CANCELED, after ``duration_s`` seconds.

    A success also reports its files before/after, the bytes it rewrote, and (its after-figures
    being the table's state now) the table's health gauges it measured."""
    status = str(process.status).lower()
    outcome = {"success": "succeeded", "failed": "failed", "killed": "failed", "canceled": "canceled"}.get(
        status, status
    )
    tags = {"table": process.table_id, "action": process.action}
    _emit("incr", f"process.{outcome}", 1, tags, process.action)
    _emit("timing", "process.duration", duration_s * 1000, {**tags, "status": status}, process.action, status)
    _process_cost(process, {**tags, "status": status})
    if status != "success":
        return
    summary = process.summary or {}
    before: dict[str, Any] = summary["before"] if isinstance(summary.get("before"), dict) else {}
    after: dict[str, Any] = summary["after"] if isinstance(summary.get("after"), dict) else {}
    for name, figures in (("files_before", before), ("files_after", after)):
        files = _num(figures.get("data_files"))
        if files is not None:
            _emit("gauge", f"process.{name}", files, tags, process.table_id, process.action)
    for key in REWRITTEN_BYTES_KEYS:
        rewritten = _num(summary.get(key))
        if rewritten is not None:
            _emit("incr", "process.bytes_rewritten", rewritten, tags, process.action)
    for name in HEALTH_GAUGES:
        value = _num(after.get(name))
        if value is not None:
            _emit("gauge", f"table.{name}", value, {"table": process.table_id}, process.table_id)


def _process_cost(process: Process, tags: dict[str, str]) -> None:
    """What the run cost (``core/cost.py``), whatever its status: executor core-time and CPU time as timers
    (milliseconds: StatsD and OpenTelemetry sum them per table and action), bytes read and written as
    counters. A run nothing measured sends none."""
    if process.core_seconds is None:
        return
    status = tags["status"]
    for name, seconds in (("core_time", process.core_seconds), ("cpu_time", process.cpu_seconds)):
        if seconds is not None:
            _emit("timing", f"process.{name}", seconds * 1000, tags, process.action, status)
    for name, value in (("bytes_read", process.bytes_read), ("bytes_written", process.bytes_written)):
        if value is not None:
            _emit("incr", f"process.{name}", value, tags, process.action)


@_safe
def lease_wait(table_id: str, action: str) -> None:
    """A run found the table leased by another job and waits (the operator defers and retries)."""
    _emit("incr", "lease.waits", 1, {"table": table_id, "action": action}, action)


@_safe
def lease_waited(table_id: str, action: str, waited_s: float) -> None:
    """A run got the lease after waiting ``waited_s`` seconds for it."""
    _emit("timing", "lease.wait_duration", waited_s * 1000, {"table": table_id, "action": action}, action)


@_safe
def table_health_score(table_id: str, score: int) -> None:
    """The health score of a table its format's own health hook measured (its figures are the format's)."""
    _emit("gauge", "table.health_score", score, {"table": table_id}, table_id)


@_safe
def table_health(table_id: str, files: FileStats | None) -> None:
    """Per-table gauges from a health read (pyiceberg): files, small files, delete files, snapshots."""
    if files is None:
        return
    from airflow_tablemgmt.metadata.health import score

    values = {name: getattr(files, name) for name in HEALTH_GAUGES}
    # The same 0-100 score REST, the page and the CLI show (metadata/health.py).
    values["health_score"] = score(files).score
    for name, value in values.items():
        _emit("gauge", f"table.{name}", value, {"table": table_id}, table_id)
