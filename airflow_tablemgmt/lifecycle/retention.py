"""Which snapshots of a table its expiry must keep: those dynamic tables read their next change from.

An incremental refresh reads what changed in a source since the snapshot the last refresh recorded
(``core/dynamic/incremental_decision.py``). If the source's own expire-snapshots removes that snapshot, the
change can no longer be read and the next refresh recomputes the whole query, naming the expired snapshot:
the project's own maintenance would cost its dynamic tables a FULL refresh each time. So before an
expire-snapshots run the lifecycle asks here, and the Iceberg job moves its cutoff back to keep the oldest
of these snapshots and everything after it (``formats/iceberg/job/snapshots.py``).

Only ACTIVE dynamic tables whose last successful refresh left the whole table equal to its query at the
snapshots it recorded (``incremental_base``) hold a snapshot back: a suspended table, a FULL-only one, or one
whose next refresh is full anyway never delays an expiry.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)

#: The action whose runs are told what to keep.
EXPIRE_SNAPSHOTS = "expire-snapshots"


def snapshots_to_keep(store: Store, table_id: str) -> dict[str, int]:
    """Per dynamic table reading ``table_id`` incrementally, the snapshot id of ``table_id`` that its next
    refresh reads the change from. Empty when none does (or the store has no dynamic tables)."""
    from airflow_tablemgmt.core.dynamic.spec import DynamicState, RefreshMode

    keep: dict[str, int] = {}
    for dynamic in store.dynamic.list():
        definition = dynamic.definition
        if str(dynamic.state) != DynamicState.ACTIVE or definition.refresh_mode == RefreshMode.FULL:
            continue
        if definition.source_tables is not None and table_id not in definition.source_tables:
            continue
        last = store.processes.last_finished_success(dynamic.id, "refresh")
        summary = (last.summary or {}) if last is not None else {}
        if not summary.get("incremental_base"):
            continue
        snapshot = (summary.get("source_snapshots") or {}).get(table_id)
        if isinstance(snapshot, int) and not isinstance(snapshot, bool):
            keep[dynamic.id] = snapshot
    if keep:
        log.info("tablemgmt: %s: its expiry keeps the snapshots dynamic tables read from: %s", table_id, keep)
    return keep
