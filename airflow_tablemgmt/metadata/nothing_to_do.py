"""Nothing to do: the Iceberg actions the health score does not measure, skipped when the table's metadata
shows their run would change nothing (read with pyiceberg, no JVM).

The score's findings (``metadata/health.py``) cover what maintenance improves in a table's layout. Two more
actions have a need metadata can rule out, and the health gate (``formats/iceberg/factory.py``) skips them
then, recording these figures:

* **compute-stats** when the current snapshot already has a statistics file (the Puffin file a previous run
  registered for it): there is nothing new to compute;
* **expire-data** when no live data file holds a value of the TTL column older than the retention (the
  files' lower bounds, as the manifests record them): the DELETE would match no row. A file without a
  lower bound for the column, or a column of another type, leaves the decision to the job.

delete-orphans is not ruled out here: orphan files are, by definition, in no metadata (a write that failed
wrote them), so it runs on its schedule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class NothingToDo:
    """Why a run would change nothing, and the figures that show it."""

    action: str
    reason: str
    figures: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        """The skipped process's summary, shaped as the health gate's (``metadata.health.Decision``)."""
        return {
            "skipped": True,
            "declined": True,
            "gate": "health",
            "reason": f"nothing to do: {self.reason}",
            "health": {"action": self.action, "figures": self.figures},
        }


def nothing_to_do(
    catalog: CatalogSpec, table: TableSpec, action: str, options: dict[str, Any], now: datetime | None = None
) -> NothingToDo | None:
    """Why ``action`` would change nothing on ``table`` now, or None (run it; also when unsure)."""
    from airflow_tablemgmt.metadata.files import _walk_current
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader

    if action not in ("compute-stats", "expire-data"):
        return None
    walk = _walk_current(SnapshotReader(catalog), table)  # the job's figures read it next: metadata/recent.py
    metadata = walk.metadata
    snap = metadata.current_snapshot()
    if snap is None:
        return None
    if action == "compute-stats":
        return _statistics_current(metadata, snap)
    return _no_expired_rows(metadata, walk.entries, options, now or datetime.now(UTC))


def _statistics_current(metadata: Any, snap: Any) -> NothingToDo | None:
    mine = [s for s in metadata.statistics if s.snapshot_id == snap.snapshot_id]
    if not mine:
        return None
    return NothingToDo(
        "compute-stats",
        f"the current snapshot {snap.snapshot_id} has statistics already ({mine[0].statistics_path})",
        {"snapshot_id": snap.snapshot_id, "statistics_files": len(metadata.statistics)},
    )


def _no_expired_rows(
    metadata: Any, entries: Iterable[Any], options: dict[str, Any], now: datetime
) -> NothingToDo | None:
    from pydantic import TypeAdapter
    from pyiceberg.conversions import from_bytes
    from pyiceberg.types import DateType, TimestampType, TimestamptzType

    from airflow_tablemgmt.core.durations import Duration

    column = str(options.get("column") or "")
    try:
        retention: timedelta = TypeAdapter(Duration).validate_python(options.get("retention"))
        field = metadata.schema().find_field(column, case_sensitive=False)
    except Exception:  # noqa: BLE001 - an option or column the job will name: it decides
        return None
    cutoff = now - retention
    if isinstance(field.field_type, DateType):
        bound = (cutoff.astimezone(UTC).date() - EPOCH.date()).days
    elif isinstance(field.field_type, TimestampType | TimestamptzType):
        bound = (cutoff - EPOCH) // timedelta(microseconds=1)
    else:
        return None
    oldest: int | None = None
    files = 0
    for f in entries:  # the current snapshot's live files
        if int(f.content) != 0:
            continue
        raw = (f.lower_bounds or {}).get(field.field_id)
        if raw is None:
            return None  # a file without the column's bound: only the job can tell
        value = int(from_bytes(field.field_type, raw))
        oldest = value if oldest is None else min(oldest, value)
        files += 1
    if oldest is None or oldest < bound:
        return None
    unit = "day" if isinstance(field.field_type, DateType) else "µs"
    return NothingToDo(
        "expire-data",
        f"no row of {column} is older than {options.get('retention')} (the oldest value in {files} data files "
        f"is at or after the cutoff {cutoff.isoformat(timespec='seconds')})",
        {
            "column": column,
            "cutoff": cutoff.isoformat(timespec="seconds"),
            "oldest_value": oldest,
            "cutoff_value": bound,
            "unit": unit,
            "data_files": files,
        },
    )
