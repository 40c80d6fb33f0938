"""Does this refresh run incrementally, and if not, why: a pure function of what the refresh job read.

``core.dynamic.incremental`` says whether the *query* can be maintained incrementally. Whether one
*refresh* is depends on what happened since the last one, which the job reads right before it writes:

* the last successful refresh (:class:`Previous`, handed to the job by the dynamic-tables factory from the
  store): the sources' snapshots it read, the table's snapshot it left and, for a query with ``avg``, the
  state table's snapshot it left;
* each source's change since (``core.dynamic.source_changes.classify``): only appends (read them), only
  ``replace`` commits (no change), copy-on-write deletes / overwrites (their removed rows read from Iceberg's
  changelog, unless the query cannot subtract them: ``min`` / ``max``, ``DISTINCT``), or a merge-on-read
  one (FULL, naming the snapshot);
* the table's own history since the snapshot the last refresh left (:func:`table_problem`): an incremental
  refresh adds a change to the table as that refresh left it, so anything but compactions (``replace``)
  since — someone else's write, or a refresh whose commit landed but was never recorded (killed after its
  commit) — makes the refresh FULL: adding the change again would count it twice;
* the state table's history (:func:`state_repair`): ahead of the recorded snapshot means an incremental
  refresh committed its state and was stopped before the table's commit; the state is rolled back to the
  recorded snapshot and the same change read again.

:func:`decide` puts them together in this order and gives the first reason found (the reasons are what
the history shows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_tablemgmt.core.dynamic.incremental import FULL, INCREMENTAL, Analysis, ModePlan
from airflow_tablemgmt.core.dynamic.source_changes import REPLACE, SourceChange

NO_PREVIOUS = "no previous state: no earlier refresh left the whole table equal to the query at the snapshots it recorded"
NO_TABLE_SNAPSHOT = "no previous state: the last refresh recorded no snapshot of the table"
NO_STATE = "no previous state: the last refresh kept no state for the query's avg (the state table)"
NOTHING_CHANGED = "no source changed since the last refresh (only compactions): nothing to add"


def _int(value: object) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


@dataclass(frozen=True)
class Previous:
    """What the last successful refresh left (from its process summary): the sources' snapshots it read,
    the table's snapshot after its commit, the state table's snapshot (None: it kept no state)."""

    source_snapshots: dict[str, int | None]
    snapshot_id: int | None
    state_snapshot_id: int | None = None
    process_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_snapshots": dict(self.source_snapshots),
            "snapshot_id": self.snapshot_id,
            "state_snapshot_id": self.state_snapshot_id,
            "process_id": self.process_id,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> Previous | None:
        """None for a missing or unusable document (the refresh is then FULL: no previous state)."""
        if not isinstance(doc, Mapping) or not isinstance(doc.get("source_snapshots"), Mapping):
            return None
        return cls(
            source_snapshots={str(k): _int(v) for k, v in doc["source_snapshots"].items()},
            snapshot_id=_int(doc.get("snapshot_id")),
            state_snapshot_id=_int(doc.get("state_snapshot_id")),
            process_id=_int(doc.get("process_id")),
        )

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any] | None, process_id: int | None) -> Previous | None:
        """From a successful refresh's summary (a NO_DATA one carries the table's and the state's over)."""
        if not isinstance(summary, Mapping):
            return None
        return cls.from_dict({**summary, "process_id": process_id})


def previous_of(summary: Mapping[str, Any] | None, process_id: int | None) -> dict[str, Any] | None:
    """The job's ``previous`` option from the last successful refresh's summary: None when that refresh did
    not leave the whole table equal to the query at the snapshots it recorded (``incremental_base``: a
    partition refresh, a refresh that could not pin its reads, one from before incremental refresh)."""
    if not isinstance(summary, Mapping) or not summary.get("incremental_base"):
        return None
    previous = Previous.from_summary(summary, process_id)
    return None if previous is None else previous.to_dict()


def carried_over(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a NO_DATA refresh (which changes nothing) carries over from the last one for the next."""
    keys = ("incremental_base", "snapshot_id", "state_snapshot_id")
    return {k: summary[k] for k in keys if isinstance(summary, Mapping) and k in summary}


def table_problem(
    table: str,
    recorded: int | None,
    current: int | None,
    newer: Sequence[tuple[int, str]],
    *,
    reached: bool,
) -> str | None:
    """Why ``table`` (the dynamic table) cannot take an incremental change, or None when it is as the last
    refresh left it. ``newer``: (snapshot id, operation) after ``recorded`` up to ``current``, newest first;
    ``reached``: whether walking back from ``current`` met ``recorded``."""
    if recorded is None:
        return NO_TABLE_SNAPSHOT
    if current == recorded:
        return None
    if current is None or not reached:
        return (
            f"{table}: snapshot {recorded}, which the last refresh left, is no longer in the table's history "
            "(rolled back, expired or replaced)"
        )
    for snapshot_id, operation in reversed(newer):
        if str(operation).lower() != REPLACE:
            return (
                f"{table} was written since the last refresh (snapshot {snapshot_id}, a {operation}): adding "
                "the sources' change to it could count a change twice"
            )
    return None


# What to do with the state table before an incremental refresh (state_repair's answer).
STATE_OK, STATE_ROLLBACK, STATE_REBUILD = "OK", "ROLLBACK", "REBUILD"


def state_repair(
    state_table: str,
    recorded: int | None,
    current: int | None,
    *,
    recorded_is_ancestor: bool,
) -> tuple[str, str]:
    """``(STATE_OK | STATE_ROLLBACK | STATE_REBUILD, why)`` for the state table kept beside the dynamic table.

    The state commits before the table, so a refresh stopped between the two leaves the state *ahead* of the
    snapshot the last recorded refresh left: it is rolled back to that snapshot (the recorded refresh's
    state, consistent with the table) and the same change is read again. A state that is missing, or whose
    recorded snapshot is gone, is rebuilt by a FULL refresh."""
    if recorded is None:
        return STATE_REBUILD, NO_STATE
    if current is None:
        return STATE_REBUILD, f"no previous state: the state table {state_table} is missing or empty"
    if current == recorded:
        return STATE_OK, ""
    if recorded_is_ancestor:
        return (
            STATE_ROLLBACK,
            f"the state table {state_table} is ahead of the last recorded refresh (snapshot {current}, "
            f"recorded {recorded}: a refresh stopped between its two commits); rolled back to {recorded}",
        )
    return (
        STATE_REBUILD,
        f"no previous state: snapshot {recorded} of the state table {state_table}, which the last refresh "
        "left, is no longer in its history",
    )


def state_layout_problem(state_table: str, found: str | None, expected: str) -> str | None:
    """Why the state table cannot be used as it is (a FULL refresh rebuilds it), or None. Its
    ``tablemgmt.state-layout`` property says what its rows hold (the query's aggregates, its keys' types, the
    partitions): another value is a state kept for another query, partitioning or layout."""
    if found == expected:
        return None
    if found is None:
        return (
            f"no previous state: the state table {state_table} was written by an earlier version "
            "(it keeps only the sums and counts behind avg): rebuilt with every aggregate's partials"
        )
    was, now = _layout_version(found), _layout_version(expected)
    if was != now:
        return (
            f"no previous state: the state table {state_table} was written by an earlier version "
            f"(state layout {was}, now {now}): rebuilt in layout {now}"
        )
    return (
        f"no previous state: the state table {state_table} was kept for another query or partitioning "
        f"({found!r}, expected {expected!r})"
    )


def _layout_version(layout: str) -> str:
    """The version a ``tablemgmt.state-layout`` value starts with (``4;slots=…`` → ``4``)."""
    return layout.split(";", 1)[0]


def decide(
    declared: str,
    analysis: Analysis,
    previous: Previous | None,
    changes: Mapping[str, SourceChange],
    *,
    table_problem: str | None = None,
    state_problem: str | None = None,
    removal_problem: str | None = None,
) -> ModePlan:
    """The mode this refresh runs in and why (the first reason in the module's order). ``removal_problem``:
    why the query cannot subtract removed rows (None: it can), which makes a change with removals FULL."""
    declared = str(declared).upper()
    if declared == FULL:
        return ModePlan(FULL, "refresh-mode is FULL")
    if not analysis.incremental:
        return ModePlan(FULL, f"the query cannot be maintained incrementally: {analysis.reason}")
    if previous is None or not previous.source_snapshots:
        return ModePlan(FULL, NO_PREVIOUS)
    if set(previous.source_snapshots) != set(changes):
        return ModePlan(
            FULL,
            "the query's sources are not those the last refresh read "
            f"({', '.join(sorted(previous.source_snapshots))} -> {', '.join(sorted(changes))})",
        )
    if table_problem:
        return ModePlan(FULL, table_problem)
    for table in sorted(changes):
        change = changes[table]
        if not change.incremental:
            return ModePlan(FULL, change.reason)
        if change.removes and removal_problem:
            return ModePlan(FULL, f"{change.reason}; the query's {removal_problem}: refreshed in full")
    if state_problem:
        return ModePlan(FULL, state_problem)
    appended = [changes[t] for t in sorted(changes) if changes[t].changed]
    if not appended:
        return ModePlan(INCREMENTAL, NOTHING_CHANGED)
    what = "; ".join(c.reason for c in appended)
    return ModePlan(INCREMENTAL, f"{analysis.strategy}: {what}")
