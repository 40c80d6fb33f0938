"""What changed in a dynamic table's source since the snapshot its last refresh read (issue 41, item 2).

An incremental refresh reads each source's snapshots after the one the last refresh recorded
(``source_snapshots``). Iceberg says in each snapshot's summary what kind of commit it was, and that is
what decides how the change can be read:

* ``append`` only: new rows, in the data files those snapshots added (:attr:`SourceChange.added_files`) —
  an incremental refresh reads just them;
* ``replace`` only (a compaction, a manifest rewrite, this provider's own maintenance): files rewritten,
  rows unchanged — no change at all;
* ``delete`` or ``overwrite`` (a ``DELETE``, ``MERGE``, ``UPDATE``, an overwrite): rows were removed or
  replaced; which ones only Iceberg's changelog can say (a changelog read), else the refresh is FULL —
  the reason names the snapshot and its operation;
* the recorded snapshot no longer in the table's history (expired, rolled back, the table replaced), or
  none recorded (no previous refresh read it): FULL, saying so.

The decision is a pure function of the snapshots (:func:`classify`); ``metadata/source_changes.py`` reads
them with pyiceberg (no JVM).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# What a source's change is (SourceChange.kind).
UNCHANGED = "UNCHANGED"  # the recorded snapshot is the current one
NO_DATA_CHANGE = "NO_DATA_CHANGE"  # only replace snapshots since: files rewritten, rows the same
APPENDS = "APPENDS"  # only appends (and replaces): new rows in the files the appends added
NEEDS_CHANGELOG = "NEEDS_CHANGELOG"  # deletes or overwrites: removed rows need the changelog, else FULL
NEEDS_FULL = "NEEDS_FULL"  # no usable previous state: no recorded snapshot, or it left the history

# Iceberg's DataOperations.
APPEND, REPLACE, OVERWRITE, DELETE = "append", "replace", "overwrite", "delete"
_REMOVES_ROWS = {DELETE: "removed rows", OVERWRITE: "replaced rows"}


@dataclass(frozen=True)
class SnapshotInfo:
    """One snapshot after the recorded one: its id, operation (Iceberg's summary ``operation``) and, for
    an ``append``, the data files it added (None: not listed)."""

    snapshot_id: int
    operation: str
    added_files: tuple[str, ...] | None = None
    added_records: int | None = None


@dataclass(frozen=True)
class SourceChange:
    """How one source changed since ``since`` (its recorded snapshot) up to ``current``, and why a refresh
    reading it would need more than its appends (``reason``)."""

    table: str
    kind: str
    since: int | None
    current: int | None
    reason: str
    snapshots: tuple[SnapshotInfo, ...] = ()

    @property
    def incremental(self) -> bool:
        """Whether an incremental refresh can read this change from appended files (or has none to read)."""
        return self.kind in (UNCHANGED, NO_DATA_CHANGE, APPENDS)

    @property
    def added_files(self) -> tuple[str, ...]:
        """The data files the append snapshots added, oldest first."""
        return tuple(
            f for s in reversed(self.snapshots) if s.operation == APPEND for f in (s.added_files or ())
        )

    @property
    def added_records(self) -> int:
        return sum(s.added_records or 0 for s in self.snapshots if s.operation == APPEND)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "kind": self.kind,
            "since": self.since,
            "current": self.current,
            "reason": self.reason,
            "snapshots": [
                {"snapshot_id": s.snapshot_id, "operation": s.operation, "added_records": s.added_records}
                for s in self.snapshots
            ],
            "added_files": list(self.added_files),
        }


def classify(
    table: str,
    since: int | None,
    current: int | None,
    newer: Sequence[SnapshotInfo],
    *,
    reached_since: bool,
) -> SourceChange:
    """Classify the change of ``table`` from ``since`` to ``current``.

    ``newer`` are the snapshots after ``since`` up to ``current``, newest first (the current snapshot's
    ancestry, walked back); ``reached_since`` says whether that walk met ``since`` (False: it is not an
    ancestor of the current snapshot any more)."""
    snapshots = tuple(newer)
    if since is None:
        return SourceChange(
            table,
            NEEDS_FULL,
            since,
            current,
            f"{table}: no snapshot recorded by a previous refresh",
            snapshots,
        )
    if current == since:
        return SourceChange(table, UNCHANGED, since, current, f"{table}: no snapshot since {since}")
    if current is None or not reached_since:
        return SourceChange(
            table,
            NEEDS_FULL,
            since,
            current,
            f"{table}: snapshot {since}, which the last refresh read, is no longer in the table's history "
            "(expired, rolled back, or the table was replaced)",
            snapshots,
        )
    for s in reversed(snapshots):  # oldest first: the first removal is the one named
        operation = str(s.operation).lower()
        if operation in _REMOVES_ROWS:
            return SourceChange(
                table,
                NEEDS_CHANGELOG,
                since,
                current,
                f"{table}: snapshot {s.snapshot_id} is a {operation} ({_REMOVES_ROWS[operation]}): which rows "
                "it removed needs Iceberg's changelog, else a FULL refresh",
                snapshots,
            )
        if operation not in (APPEND, REPLACE):
            return SourceChange(
                table,
                NEEDS_FULL,
                since,
                current,
                f"{table}: snapshot {s.snapshot_id} has operation {s.operation!r}, which is none of append, "
                "replace, overwrite, delete",
                snapshots,
            )
    appends = [s for s in snapshots if str(s.operation).lower() == APPEND]
    if not appends:
        return SourceChange(
            table,
            NO_DATA_CHANGE,
            since,
            current,
            f"{table}: only replace snapshots since {since} (files rewritten by a compaction or maintenance, "
            "rows unchanged)",
            snapshots,
        )
    change = SourceChange(table, APPENDS, since, current, "", snapshots)
    files = len(change.added_files)
    return SourceChange(
        table,
        APPENDS,
        since,
        current,
        f"{table}: {len(appends)} append snapshot(s) since {since}: {change.added_records} new rows"
        + (f" in {files} data file(s)" if files else ""),
        snapshots,
    )
