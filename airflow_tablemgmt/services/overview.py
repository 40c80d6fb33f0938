"""What the page shows at a glance: one page of the table list (search, filters, sort and paging in
SQL, ``store/listing.py``) with each row's badges and cached health, and the overview's figures.

No row costs a request of its own and nothing here reads Iceberg metadata: health comes from each
table's last measurement in the store (``tms_table_health``, written with ``services/health.py``'s cache
entry), which the health sort and the needs-attention filter use in SQL and the overview sums; the
tables of a page it lacks are read in the background (:func:`services.health.warm`), so the next
refresh shows them. The overview's process figures come from the rollup the store keeps as processes
change (``store/process_rollup.py``): an api-server's first overview costs what every other one does.
The fleet section (policies, enrolment, health skips, cost per day: ``services/fleet.py``) is reused for a
minute and computed on a thread (``fleet_pending`` until it is in).

A process's times are :func:`services.processes.timings` (one definition for the CLI, REST and
the page).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.services.fleet import FLEET_SECONDS, cached_fleet
from airflow_tablemgmt.services.health import CachedHealth, stored_health, warm
from airflow_tablemgmt.services.processes import timings  # noqa: F401 - the page's times, re-exported
from airflow_tablemgmt.store import listing
from airflow_tablemgmt.store.listing import ActionState, TableFilter

if TYPE_CHECKING:
    from airflow_tablemgmt.core.process import Process
    from airflow_tablemgmt.store import Store

SORTS = listing.SORTS


def enabled(actions: dict[str, Any]) -> list[str]:
    """The enabled actions of a stored ``actions`` document, sorted (as ``TableSpec.enabled_actions``)."""
    return sorted(a for a, o in actions.items() if not (isinstance(o, dict) and o.get("enabled") is False))


@dataclass(frozen=True)
class TableRow:
    table: str
    format: str
    managed_by: str
    owner: str
    queue: str
    actions: list[str]
    badges: dict[str, ActionState]
    health: CachedHealth | None
    dynamic: dict[str, Any] | None = None
    policy: str | None = None  # the policy that enrolled it (managed_by policy)


@dataclass(frozen=True)
class TablePage:
    items: list[TableRow]
    total: int
    limit: int
    offset: int
    measuring: int = 0  # tables of this page whose health is being read now
    measured: int = 0  # tables of the whole store with a cached health read
    sorts: tuple[str, ...] = field(default=SORTS)


def list_page(
    store: Store,
    f: TableFilter,
    *,
    sort: str = "table",
    desc: bool = False,
    needs_attention: bool = False,
    limit: int = 25,
    offset: int = 0,
    warm_missing: bool = True,
) -> TablePage:
    """One page of the table list: search, filters (``needs_attention`` included), sort (``health``
    included: worst first, unmeasured last) and paging in SQL."""
    if f.action is not None:
        ACTIONS.get(f.action)  # an unknown action is an error naming the known ones
    if needs_attention and not f.needs_attention:
        f = replace(f, needs_attention=True)
    engine = store.engine
    rows, total = listing.page(engine, f, sort=sort, desc=desc, limit=limit, offset=offset)
    ids = [r.table_id for r in rows]
    states = listing.action_states(engine, ids)
    health = stored_health(store, ids)
    items = []
    for r in rows:
        names = enabled(r.actions)
        items.append(
            TableRow(
                r.table_id,
                r.format,
                r.managed_by,
                r.owner,
                r.queue,
                names,
                {a: states.get((r.table_id, a), ActionState()) for a in names},
                health.get(r.table_id),
                r.dynamic,
                r.policy,
            )
        )
    missing = [r.table for r in items if r.health is None]
    queued = warm(store, missing) if warm_missing and missing else 0
    measured = _measured(store)
    return TablePage(items, total, limit, offset, measuring=queued or len(missing), measured=measured)


def removed_by(p: Process) -> dict[str, int]:
    """What a finished process removed, ``{"files", "bytes"}``: the store's own figure
    (``store.process_rollup.removed``), the one the overview's "files removed" sums, so an action's chart
    of it and the overview are one figure from one source (an expiry's manifest lists and statistics files
    are not counted in either)."""
    from airflow_tablemgmt.store.process_rollup import removed

    files, data = removed(str(p.status), p.summary)
    return {"files": files, "bytes": data}


def _measured(store: Store) -> int:
    from airflow_tablemgmt.store.table_health import TableHealthRepository

    return TableHealthRepository.of(store).measured_count()


#: Seconds the overview's process aggregates are reused (per store, per api-server process): a page
#: polled by several people need not re-read the rollup each time.
FIGURES_SECONDS = 10.0
_FIGURES: dict[str, tuple[float, dict[str, Any]]] = {}
_FIGURES_LOCK = threading.Lock()


#: A stale set of figures younger than this many ``ttl``s is served while a background thread
#: recomputes it; older ones (and an api-server's first) are computed in the request, from the rollup
#: (``tms_action_latest``, ``tms_process_done``), as cheaply as any other.
STALE_SERVED = 30
_REFRESHING: set[str] = set()


def _process_figures(store: Store, now: datetime, ttl: float) -> dict[str, Any]:
    key = store.display_url
    with _FIGURES_LOCK:
        hit = _FIGURES.get(key)
    age = time.monotonic() - hit[0] if hit is not None else None
    if hit is not None and age is not None and age < ttl:
        return {**hit[1], "figures_age_s": round(age, 1)}
    if hit is not None and age is not None and ttl > 0 and age < ttl * STALE_SERVED:
        with _FIGURES_LOCK:
            start = key not in _REFRESHING
            _REFRESHING.add(key)
        if start:

            def refresh() -> None:
                try:
                    _compute_figures(store, store.processes.now())
                except Exception:  # noqa: BLE001 - the next request computes them in line
                    pass
                finally:
                    with _FIGURES_LOCK:
                        _REFRESHING.discard(key)

            threading.Thread(target=refresh, name="tablemgmt-overview-figures", daemon=True).start()
        return {**hit[1], "figures_age_s": round(age, 1)}
    return {**_compute_figures(store, now), "figures_age_s": 0.0}


def _compute_figures(store: Store, now: datetime) -> dict[str, Any]:
    key = store.display_url
    engine = store.engine
    figures = {
        "newest_status": listing.newest_status_counts(engine),
        "failing": [
            {
                "process_id": r.id,
                "table": r.table_id,
                "action": r.action,
                "status": r.status,
                "instant": r.instant,
                "finished_at": r.finished_at,
                "reason": r.failure_reason,
            }
            for r in listing.failing(engine)
        ],
        **_rollup(listing.finished_per_hour(engine, now - timedelta(days=30)), now),
    }
    with _FIGURES_LOCK:
        _FIGURES[key] = (time.monotonic(), figures)
    return figures


#: Unmeasured tables one overview request queues for a background health read.
WARM_LIMIT = 500


def overview(
    store: Store, *, now: datetime | None = None, ttl: float = FIGURES_SECONDS, warm_missing: bool = True
) -> dict[str, Any]:
    """The overview page's figures: tables and the unfinished processes read now, the failing ones and
    the finished ones' aggregates at most ``ttl`` seconds old, health from the tables' stored measurements."""
    from airflow_tablemgmt.store.table_health import TableHealthRepository

    engine = store.engine
    now = now or store.processes.now()
    counts = listing.table_counts(engine)
    repo = TableHealthRepository.of(store)
    summary = repo.summary()  # sums over the live tables' stored measurements: no row per table
    measuring = 0
    if warm_missing and summary.measured < counts["tables"]:
        # Measured in the background; the page asks again while ``measuring`` says some are being read,
        # so the overview fills in on its own, with no visit to the table list.
        unmeasured = repo.unmeasured(WARM_LIMIT)
        warm(store, unmeasured)
        measuring = len(unmeasured)
    active, per_status = listing.active(engine)
    return {
        "now": now,
        "tables": counts["tables"],
        "dynamic_tables": counts["dynamic"],
        "per_catalog": counts["per_catalog"],
        "measured_tables": summary.measured,
        "measuring": measuring,
        "data_bytes": summary.data_bytes,
        "data_files": summary.data_files,
        "removable_files": summary.excess_data_files,
        "mean_health_score": summary.mean_score,
        "needs_attention": summary.needs_attention,
        "attention_by_kind": summary.by_kind,
        "active_per_status": per_status,
        "active": [
            {
                "process_id": r.id,
                "table": r.table_id,
                "action": r.action,
                "status": r.status,
                "instant": r.instant,
                "created_at": r.created_at,
                "started_at": r.started_at,
                "waiting_s": round((now - r.created_at).total_seconds(), 1) if r.started_at is None else None,
                "lease_acquired_at": r.lease_acquired_at,
                # PENDING without the lease: waiting for it; lease taken, not running: the queue
                "lease_wait_s": round(((r.lease_acquired_at or now) - r.created_at).total_seconds(), 1)
                if r.started_at is None and r.status == "PENDING"
                else None,
                "dag_id": r.dag_id,
                "run_id": r.run_id,
            }
            for r in active
        ],
        **_process_figures(store, now, ttl),
        **_fleet(store, now, ttl),
    }


def _fleet(store: Store, now: datetime, ttl: float) -> dict[str, Any]:
    """The fleet (``services/fleet.py``): reused for a minute (computed in line with ``ttl`` 0), None and
    ``fleet_pending`` while a thread computes the first."""
    figures = cached_fleet(store, now, FLEET_SECONDS if ttl > 0 else 0)
    return {"fleet": figures, "fleet_pending": figures is None}


def _label(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H")


def _done(rows: list[dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, dict[str, int]] = {}
    failed = 0
    for r in rows:
        if r["status"] in listing.FAILED:
            failed += r["n"]
        if r["status"] != "SUCCESS":
            continue
        a = per.setdefault(r["action"], {"succeeded": 0, "files_removed": 0, "bytes_removed": 0})
        a["succeeded"] += r["n"]
        a["files_removed"] += r["files_removed"]
        a["bytes_removed"] += r["bytes_removed"]
    return {
        "succeeded": sum(a["succeeded"] for a in per.values()),
        "failed": failed,
        "files_removed": sum(a["files_removed"] for a in per.values()),
        "bytes_removed": sum(a["bytes_removed"] for a in per.values()),
        "per_action": per,
    }


def _rollup(rows: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """The last 24 h and 7 days (whole UTC hours: the current one and those before it) and the last 30
    days per UTC day, from the per-hour rows."""
    day_ago, week_ago = _label(now - timedelta(hours=23)), _label(now - timedelta(hours=24 * 7 - 1))
    days: dict[str, dict[str, Any]] = {}
    for r in rows:
        d = days.setdefault(
            r["hour"][:10],
            {"day": r["hour"][:10], "succeeded": 0, "failed": 0, "files_removed": 0, "bytes_removed": 0},
        )
        if r["status"] == "SUCCESS":
            d["succeeded"] += r["n"]
            d["files_removed"] += r["files_removed"]
            d["bytes_removed"] += r["bytes_removed"]
        elif r["status"] in listing.FAILED:
            d["failed"] += r["n"]
    return {
        "done_24h": _done([r for r in rows if r["hour"] >= day_ago]),
        "done_7d": _done([r for r in rows if r["hour"] >= week_ago]),
        "daily_30d": [days[k] for k in sorted(days)],
    }
