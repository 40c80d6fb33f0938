"""The overview's fleet section: the policies with how many tables each manages, what discovery enrolled and
retired, the runs the health gate skipped and why, and what each policy's maintenance cost per day.

Everything is read from small tables or indexed windows, never from every table or every process, so the
overview stays within its budget at 10,000 tables (issue 29): the policies (``tms_policy``), the live
tables per policy (one grouped count of ``tms_table``), the enrolment records of the window (``tms_enrolment``
by ``at``), the health gate's skips of the window (``store/fleet.py``: the finished processes' narrow rows by
``finished_at``, their summaries' ``gate`` tested by the database) and the cost per UTC day, table, action
and status the store keeps as processes finish (``tms_process_day``, ``store/process_cost.py``), grouped by
day and policy. Still, at 10,000 tables that is about a tenth of a second of CPU, more than the rest of the
overview: :func:`cached_fleet` reuses it for :data:`FLEET_SECONDS` and computes it on a thread, so no
request waits for it (the page asks again while it is pending).

The window is :data:`DAYS` days: the enrolment changes and skips of the last ``DAYS`` × 24 hours, the cost of
the last ``DAYS`` UTC days with today (the day rows are per UTC day, as ``tablemgmt cost --days``). Cost per
day is that window's sum divided by ``DAYS``.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.store import fleet as fleet_rows
from airflow_tablemgmt.store import process_cost

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)

#: The fleet's window in days (the "last 7 days" of the overview).
DAYS = 7
#: Enrolment changes and health skips the overview lists (the newest).
RECENT = 20
#: The kinds of enrolment change counted as enrolled (a table that came back is enrolled again).
ENROLLING = ("enrolled", "re-enrolled")


def _cost(rows: list[process_cost.CostRow]) -> dict[str, Any]:
    return {
        "runs": sum(r.n for r in rows),
        "measured": sum(r.measured for r in rows),
        "core_seconds": round(sum(r.core_seconds for r in rows), 3),
        "bytes_read": sum(r.bytes_read for r in rows),
        "bytes_written": sum(r.bytes_written for r in rows),
    }


def _per_day(total: dict[str, Any]) -> dict[str, Any]:
    return {
        "core_hours": round(total["core_seconds"] / 3600 / DAYS, 4),
        "bytes_read": total["bytes_read"] // DAYS,
        "bytes_written": total["bytes_written"] // DAYS,
    }


def fleet(store: Store, now: datetime) -> dict[str, Any]:
    """The fleet section's figures at ``now`` (see the module's docstring); ``policies`` is empty when the
    store holds none (the page then shows a hint), and nothing else is read then."""
    from airflow_tablemgmt.store.policies import PolicyRepository

    repo = PolicyRepository.of(store)
    stored, unreadable = repo.list_with_errors()
    managed = repo.enrolled_counts()
    since = now - timedelta(days=DAYS)
    first_day = process_cost.as_of(now - timedelta(days=DAYS - 1))
    empty = {
        "days": DAYS,
        "since": since,
        "first_day": first_day,
        "policies": [],
        "cost_daily": [],
        "enrolments": [],
        "skips": [],
    }
    names = sorted({p.name for p in stored} | {u.name for u in unreadable} | set(managed))
    if not names:
        return {**empty, "skipped": 0}
    engine = store.engine
    changes = fleet_rows.enrolment_counts(engine, since)
    skipped = fleet_rows.health_skip_counts(engine, since)
    daily = process_cost.rollup(
        engine, ["day", "policy"], since_day=first_day, until_day=process_cost.as_of(now), limit=DAYS * 1000
    )
    by_policy: dict[str, list[process_cost.CostRow]] = {}
    for row in daily:
        if row.key.get("policy") is not None:
            by_policy.setdefault(str(row.key["policy"]), []).append(row)
    specs = {p.name: p for p in stored}
    errors = {u.name: u.message for u in unreadable}
    policies = []
    for name in names:
        spec = specs.get(name)
        counted = changes.get(name, {})
        cost = _cost(by_policy.get(name, []))
        policies.append(
            {
                "name": name,
                "description": spec.policy.description if spec else "",
                "owner": str(spec.managed_by) if spec else None,
                "exists": name in specs or name in errors,
                "error": errors.get(name),
                "tables": managed.get(name, 0),
                "enrolled": sum(counted.get(c, 0) for c in ENROLLING),
                "retired": counted.get("retired", 0),
                "updated": counted.get("updated", 0),
                "skipped": skipped.get(name, 0),
                "cost": cost,
                "per_day": _per_day(cost),
            }
        )
    return {
        **empty,
        "skipped": sum(skipped.values()),
        "policies": policies,
        "cost_daily": [
            {"day": r.key["day"], "policy": r.key["policy"], **_cost([r])}
            for r in daily
            if r.key.get("policy") is not None
        ],
        "enrolments": fleet_rows.recent_enrolments(engine, since, RECENT),
        "skips": fleet_rows.recent_health_skips(engine, since, RECENT),
    }


# ---- reused, and computed off the request -------------------------------------------------------------------

#: Seconds the fleet's figures are reused (per store, per api-server process); older ones are served while a
#: thread computes them again.
FLEET_SECONDS = 60.0
#: How long a request with no fleet computed yet waits for the thread before it answers without it
#: (``fleet_pending``; the page asks again a second later). None: the thread would compete with the request
#: for the interpreter, and an api-server's first overview then stays within its budget (measured:
#: ``benchmarks/ui_latency.py``'s cold row, docs/ui.md).
WAIT_SECONDS = 0.0

_CACHE: dict[str, tuple[float, dict[str, Any]]] = {}
_RUNNING: dict[str, threading.Thread] = {}
_LOCK = threading.Lock()


def _compute(store: Store, key: str) -> None:
    try:
        figures = fleet(store, store.processes.now())
        with _LOCK:
            _CACHE[key] = (time.monotonic(), figures)
    except Exception:  # noqa: BLE001 - the overview shows the rest; the next request tries again
        log.exception("tablemgmt: the overview's fleet could not be computed")
    finally:
        with _LOCK:
            _RUNNING.pop(key, None)


def _started(store: Store, key: str) -> threading.Thread:
    with _LOCK:
        thread = _RUNNING.get(key)
        if thread is None:
            thread = threading.Thread(target=_compute, args=(store, key), name="tablemgmt-fleet", daemon=True)
            _RUNNING[key] = thread
            thread.start()
    return thread


def cached_fleet(store: Store, now: datetime, ttl: float = FLEET_SECONDS) -> dict[str, Any] | None:
    """The fleet's figures at most ``ttl`` seconds old, with ``age_s``; older ones while a thread computes
    them again; None when none are computed yet and the thread took longer than :data:`WAIT_SECONDS` (the
    overview says ``fleet_pending``). ``ttl`` 0: computed now, in the request."""
    key = store.display_url
    if ttl <= 0:
        figures = fleet(store, now)
        with _LOCK:
            _CACHE[key] = (time.monotonic(), figures)
        return {**figures, "age_s": 0.0}
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is None or time.monotonic() - hit[0] >= ttl:
        thread = _started(store, key)
        if hit is None:
            thread.join(WAIT_SECONDS)
            with _LOCK:
                hit = _CACHE.get(key)
            if hit is None:
                return None
    return {**hit[1], "age_s": round(time.monotonic() - hit[0], 1)}
