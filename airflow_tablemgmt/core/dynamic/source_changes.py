"""What changed in a dynamic table's source since the snapshot its last refresh read (issue 41, item 2).

An incremental refresh reads each source's snapshots after the one the last refresh recorded
(``source_snapshots``). Iceberg says in each snapshot's summary what kind of commit it was, and that is
what decides how the change can be read:

* ``append`` only: new rows, in the data files those snapshots added (:attr:`SourceChange.added_files`) —
  an incremental refresh reads just them;
* ``replace`` only (a compaction, a manifest rewrite, this provider's own maintenance): files rewritten,
  rows unchanged — no change at all;
* ``delete`` or ``overwrite`` (a ``DELETE``, ``MERGE``, ``UPDATE``, an overwrite) written copy-on-write: rows
  were removed or replaced, and Iceberg's changelog (its ``changes`` table) gives them — the removed data
  files' rows as deleted, the added files' as inserted (``CHANGELOG``); the refresh subtracts them;
* the same written merge-on-read (the snapshot added delete files, or the table had delete files then):
  Iceberg's changelog scan does not read delete files, so which rows went is not known and the refresh is
  FULL — the reason names the snapshot, its operation and the delete files;
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
CHANGELOG = "CHANGELOG"  # copy-on-write deletes or overwrites too: rows added and removed, from the changelog
NEEDS_FULL = "NEEDS_FULL"  # no recorded snapshot, it left the history, or a merge-on-read delete

# Iceberg's DataOperations.
APPEND, REPLACE, OVERWRITE, DELETE = "append", "replace", "overwrite", "delete"
_REMOVES_ROWS = {DELETE: "removed rows", OVERWRITE: "replaced rows"}


@dataclass(frozen=True)
class SnapshotInfo:
    """One snapshot after the recorded one: its id, operation (Iceberg's summary ``operation``) and, for
    an ``append``, the data files it added (None: not listed); from its summary, None when it does not say:
    the rows it added and removed (``added-records``, ``deleted-records``: a rewritten file's rows count as
    both), and the delete files the table held after it (``total-delete-files``: a merge-on-read write, or one
    over a table that has some)."""

    snapshot_id: int
    operation: str
    added_files: tuple[str, ...] | None = None
    added_records: int | None = None
    deleted_records: int | None = None
    delete_files: int | None = None


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
        """Whether an incremental refresh can read this change (appended files, Iceberg's changelog) or has
        none to read."""
        return self.kind in (UNCHANGED, NO_DATA_CHANGE, APPENDS, CHANGELOG)

    @property
    def changed(self) -> bool:
        """Whether there are rows to read (appended, or added and removed)."""
        return self.kind in (APPENDS, CHANGELOG)

    @property
    def removes(self) -> bool:
        """Whether rows were removed too (read from Iceberg's changelog)."""
        return self.kind == CHANGELOG

    @property
    def added_files(self) -> tuple[str, ...]:
        """The data files the append snapshots added, oldest first."""
        return tuple(
            f for s in reversed(self.snapshots) if s.operation == APPEND for f in (s.added_files or ())
        )

    @property
    def added_records(self) -> int:
        return sum(s.added_records or 0 for s in self.snapshots if s.operation == APPEND)

    @property
    def deleted_records(self) -> int:
        """The rows the delete and overwrite snapshots removed (their summaries' ``deleted-records``: the
        rows of the data files they dropped or rewrote)."""
        return sum(
            s.deleted_records or 0 for s in self.snapshots if str(s.operation).lower() in _REMOVES_ROWS
        )

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
    removing: list[SnapshotInfo] = []
    for s in reversed(snapshots):  # oldest first: the first one that cannot be read is the one named
        operation = str(s.operation).lower()
        if operation in _REMOVES_ROWS:
            if s.delete_files:
                return SourceChange(
                    table,
                    NEEDS_FULL,
                    since,
                    current,
                    f"{table}: snapshot {s.snapshot_id} is a {operation} ({_REMOVES_ROWS[operation]}) of a table "
                    f"with delete files ({s.delete_files}, merge-on-read): Iceberg's changelog does not read "
                    "delete files, so which rows it removed is not known: a FULL refresh",
                    snapshots,
                )
            removing.append(s)
        elif operation not in (APPEND, REPLACE):
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
    if removing:
        return _changelog(table, since, current, snapshots, removing, appends)
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


def _changelog(
    table: str,
    since: int,
    current: int | None,
    snapshots: tuple[SnapshotInfo, ...],
    removing: list[SnapshotInfo],
    appends: list[SnapshotInfo],
) -> SourceChange:
    """Deletes and overwrites written copy-on-write, read from Iceberg's changelog (what it reads: the removed
    or rewritten data files' rows, and the added files')."""
    kinds = "/".join(sorted({str(s.operation).lower() for s in removing}))
    added = sum(s.added_records or 0 for s in snapshots if str(s.operation).lower() != REPLACE)
    removed = sum(s.deleted_records or 0 for s in removing)
    return SourceChange(
        table,
        CHANGELOG,
        since,
        current,
        f"{table}: {len(appends)} append and {len(removing)} {kinds} snapshot(s) since {since} (copy-on-write), "
        f"read from Iceberg's changelog: {removed} rows of the data files removed or rewritten, {added} rows "
        "added",
        snapshots,
    )
