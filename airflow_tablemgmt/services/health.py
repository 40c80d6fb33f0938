"""Table health: file counts and sizes from Iceberg metadata (pyiceberg, no JVM), plus the last
success and failure of each enabled action from the store.

Reading a table's manifests costs one metadata read per manifest, so a table's figures are kept for
:data:`CACHE_SECONDS` (a minute) per process; the process figures are read fresh each time (one
indexed query per action).

The file figures and what a *small file* is are ``metadata/files.py``'s (:class:`FileStats`); the
catalog's secret references are resolved here, before the read.

The score (0–100) and its findings are ``metadata/health.py``'s. Each fresh read is also the table's row
in the store (``tms_table_health``, :func:`remember`): the list sorts and filters on it in SQL and the
overview sums it, whichever process (an api-server, a worker after a process) measured the table;
:func:`stored_health` hands a page its rows without reading anything, and :func:`warm` reads the tables
the store lacks (or holds stale) on one background thread, so a page of the list never waits for
Iceberg metadata.

Each fresh read also sends the table's ``tablemgmt.table.*`` gauges through Airflow's Stats
(:mod:`airflow_tablemgmt.observability`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.factories.health import Reading, read_health, score_of
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.metadata.health import FormatHealth, HealthScore, score
from airflow_tablemgmt.metadata.health import removable as removable_files
from airflow_tablemgmt.store.effective import effective_table

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.table_health import HealthRecord

CACHE_SECONDS = 60.0


@dataclass(frozen=True)
class ActionHealth:
    action: str
    last_success: datetime | None
    last_success_process: int | None
    last_failure: datetime | None
    last_failure_process: int | None
    last_failure_reason: str | None


@dataclass(frozen=True)
class TableHealth:
    table: str
    files: FileStats | None
    read_at: datetime
    error: str | None = None  # why ``files`` is None: the metadata read failed
    actions: list[ActionHealth] = field(default_factory=list)
    format_health: FormatHealth | None = None  # the format's own figures and findings (its health hook)

    @property
    def score(self) -> HealthScore | None:
        if self.format_health is not None:
            return self.format_health.score
        return score(self.files) if self.files is not None else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.files is not None:
            for name in ("small_file_ratio", "excess_data_files", "deleted_row_ratio"):
                out["files"][name] = getattr(self.files, name)
        out["format_health"] = self.format_health.to_dict() if self.format_health is not None else None
        out["health"] = self.score.to_dict() if self.score is not None else None
        return out


def read_file_stats(catalog: CatalogSpec, table: TableSpec) -> Reading:
    """The table's health read with ``catalog``'s secret references resolved (``factories/health.py``:
    its format's health hook when the format declared one, else the Iceberg file figures)."""
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec

    return read_health(resolve_catalog_spec(catalog), table)


class _Cache:
    """Figures per store and table (keys ``<store>|<table>``), with their score computed once when put:
    the list and the overview read every table of a store at once."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._stores: dict[str, dict[str, tuple[float, Reading, HealthScore]]] = {}

    def get(self, key: str, ttl: float) -> Reading | None:
        store, _, table = key.rpartition("|")
        with self._lock:
            hit = self._stores.get(store, {}).get(table)
        return hit[1] if hit is not None and self.clock() - hit[0] < ttl else None

    def put(self, key: str, stats: Reading) -> None:
        store, _, table = key.rpartition("|")
        entry = (self.clock(), stats, score_of(stats))
        with self._lock:
            self._stores.setdefault(store, {})[table] = entry

    def snapshot(self, prefix: str) -> dict[str, tuple[float, Reading, HealthScore]]:
        """Every entry of one store (``prefix`` is ``<store>|``), by table id, with its read time."""
        with self._lock:
            return dict(self._stores.get(prefix.rpartition("|")[0], {}))


_CACHE = _Cache(time.monotonic)


def table_health(
    store: Store,
    table_id: str,
    *,
    ttl: float = CACHE_SECONDS,
    cache: _Cache | None = None,
    read: Callable[[CatalogSpec, TableSpec], Reading] = read_file_stats,
    actions: bool = True,
) -> TableHealth:
    """Health of a live table. An unreadable table still answers, with ``files`` None and ``error``.
    ``actions`` False: without each action's last success and failure (two store reads an action; a batch
    measuring a table after its process needs only the figures remembered)."""
    spec = effective_table(store, table_id)  # the thresholds the gate uses: the policies' merged in
    cache = cache or _CACHE
    key = _key(store, spec.id)
    reading = cache.get(key, ttl)
    error = None
    fresh = False
    if reading is None:
        try:
            reading = read(store.catalogs.get(spec.catalog), spec)
            remember(store, spec.id, reading, cache=cache)
            fresh = True
        except TableMgmtError as e:
            error = str(e)
    done = [_action_health(store, spec.id, a) for a in spec.enabled_actions()] if actions else []
    own = reading if isinstance(reading, FormatHealth) else None
    files = reading if isinstance(reading, FileStats) else None
    health = TableHealth(spec.id, files, store.processes.now(), error, done, own)
    if fresh:  # a cached read was sent when it was made
        from airflow_tablemgmt import observability

        if files is not None:
            observability.table_health(health.table, files)
        elif own is not None:  # the format's figures are its own: the score is the shared gauge
            observability.table_health_score(health.table, own.score.score)
    return health


def _action_health(store: Store, table_id: str, action: str) -> ActionHealth:
    ok = store.processes.last_successful(table_id, action)
    failed = store.processes.list(
        table_id=table_id, action=action, status=[ProcessStatus.FAILED, ProcessStatus.KILLED], limit=1
    )
    bad = failed[0] if failed else None
    return ActionHealth(
        action,
        (ok.finished_at or ok.instant) if ok else None,
        ok.id if ok else None,
        (bad.finished_at or bad.instant) if bad else None,
        bad.id if bad else None,
        bad.failure_reason if bad else None,
    )


def _key(store: Store, table_id: str) -> str:
    return f"{store.display_url}|{table_id}"


def _record(reading: Reading) -> HealthRecord:
    from airflow_tablemgmt.store.table_health import HealthRecord

    scored = score_of(reading)
    kinds = tuple((f.kind, f.action) for f in scored.findings)
    if isinstance(reading, FormatHealth):  # the format's figures, under the names the overview sums
        fig = reading.figures
        files = int(fig.get("data_files") or fig.get("base_files") or 0)
        data = int(fig.get("data_bytes") or fig.get("total_bytes") or 0)
        removable = int(fig.get("removable_files") or 0)
        return HealthRecord(scored.score, kinds, files, data, removable, {"format_health": reading.to_dict()})
    return HealthRecord(
        scored.score,
        kinds,
        reading.data_files,
        reading.data_bytes,
        removable_files(reading),  # per partition, as the compaction plans it (metadata/health.py)
        asdict(reading),
    )


def reading_of(document: dict[str, Any]) -> Reading:
    """What a stored row's figures document holds: a format's health, or the file figures (one conversion,
    the planning step's too: ``metadata/planning.py``)."""
    from airflow_tablemgmt.metadata.planning import reading_of as stored_reading

    return stored_reading(document)


def remember(store: Store, table_id: str, files: Reading, *, cache: _Cache | None = None) -> None:
    """A fresh read of ``table_id``: the process's cache entry and the table's row in the store."""
    from airflow_tablemgmt.store.table_health import TableHealthRepository

    (cache or _CACHE).put(_key(store, table_id), files)
    TableHealthRepository.of(store).put(table_id, _record(files))


def remember_many(store: Store, reads: dict[str, Reading], *, cache: _Cache | None = None) -> None:
    """:func:`remember` for many tables in one transaction (a bulk fill)."""
    from airflow_tablemgmt.store.table_health import TableHealthRepository

    for table_id, files in reads.items():
        (cache or _CACHE).put(_key(store, table_id), files)
    TableHealthRepository.of(store).put_many({t: _record(f) for t, f in reads.items()})


def figures_of(document: dict[str, Any]) -> FileStats:
    """The :class:`FileStats` a stored row's figures document holds (fields it lacks take their defaults)."""
    known = FileStats.__dataclass_fields__
    return FileStats(**{k: v for k, v in document.items() if k in known})


@dataclass(frozen=True)
class CachedHealth:
    """A table's last health read, as the list and the overview show it (no metadata read): the file
    figures, or (``files`` None) its format's own."""

    files: FileStats | None
    score: HealthScore
    age_s: float
    format_health: FormatHealth | None = None


def stored_health(store: Store, table_ids: list[str]) -> dict[str, CachedHealth]:
    """Table id -> its last measurement in the store (stale ones included: the list shows the last
    known score with its age rather than none), for those of ``table_ids`` measured (one page)."""
    from airflow_tablemgmt.store.table_health import TableHealthRepository

    records = TableHealthRepository.of(store).get_many(table_ids)
    if not records:
        return {}
    now = store.processes.now()
    out = {}
    for table_id, r in records.items():
        reading = reading_of(r.figures)
        age = round(max((now - r.measured_at).total_seconds() if r.measured_at is not None else 0.0, 0.0), 1)
        if isinstance(reading, FormatHealth):
            out[table_id] = CachedHealth(None, reading.score, age, reading)
        else:
            out[table_id] = CachedHealth(reading, score(reading), age)
    return out


_WARMING: set[str] = set()
_WARM_LOCK = threading.Lock()


def warm(store: Store, table_ids: list[str], *, ttl: float | None = None) -> int:
    """Read the health of those ``table_ids`` the store lacks (or holds older than ``ttl``, default
    :data:`CACHE_SECONDS`) on a background thread; returns how many it queued. A table already being
    read is not queued again."""
    from airflow_tablemgmt.store.table_health import TableHealthRepository

    ttl = CACHE_SECONDS if ttl is None else ttl
    measured = TableHealthRepository.of(store).measured_at(table_ids)
    now = store.processes.now() if measured else None
    wanted = [t for t in table_ids if t not in measured or (now - measured[t]).total_seconds() >= ttl]  # type: ignore[operator]
    with _WARM_LOCK:
        todo = [t for t in wanted if _key(store, t) not in _WARMING]
        _WARMING.update(_key(store, t) for t in todo)
    if not todo:
        return 0

    def run() -> None:
        for t in todo:
            try:
                table_health(store, t, ttl=ttl)
            except Exception:  # noqa: BLE001 - a removed table or a broken catalog: the next list retries
                pass
            finally:
                with _WARM_LOCK:
                    _WARMING.discard(_key(store, t))

    threading.Thread(target=run, name="tablemgmt-health-warm", daemon=True).start()
    return len(todo)
