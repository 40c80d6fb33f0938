"""Recovery without shared storage: did an earlier attempt commit? Ask the table.

The result file (:mod:`.results`) is local to the worker that wrote it; a retry on another host (two
Celery workers with their own ``$AIRFLOW_HOME``) cannot see it. The job also marks its commits with its
process id, attempt and action (``spark/job/commit_mark.py``): an Iceberg snapshot's summary, a Delta
commit's ``userMetadata``. :func:`committed_in_table` reads the table's metadata (no Spark) and returns
what :func:`~.results.record_predecessor_success` records: SUCCESS without running the job again.

A mark counts only when it names this process, this action and an earlier attempt, and was committed
after the process row was created (a process id repeats in another store). An unreadable table is no
answer: the job runs again, as it did before the mark existed.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.formats import TableFormat
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.spark.job.commit_mark import ACTION, ATTEMPT, PROCESS

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

log = logging.getLogger("airflow_tablemgmt.lifecycle")

#: How many of the newest commits are looked at (a job's marks are among the last ones).
NEWEST = 200


def _matches(mark: dict[str, Any], process: Process, committed_ms: int | None) -> int | None:
    """The attempt ``mark`` names when it is an earlier attempt of ``process``, else None."""
    if str(mark.get(PROCESS)) != str(process.id) or mark.get(ACTION) != process.action:
        return None
    try:
        attempt = int(mark.get(ATTEMPT, 0))
    except (TypeError, ValueError):
        return None
    if not 0 < attempt < process.attempt:
        return None
    if process.created_at is not None and committed_ms is not None:
        if committed_ms < int(process.created_at.timestamp() * 1000) - 1000:  # 1 s of clock slack
            return None
    return attempt


def _iceberg_commits(catalog: CatalogSpec, table: TableIdentifier) -> list[tuple[dict[str, Any], int, int]]:
    """``(summary, snapshot id, timestamp ms)`` of the table's snapshots, newest last."""
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader, local_warehouse_path

    reader = SnapshotReader(catalog)
    pointer = reader.metadata_pointer(table)
    local = local_warehouse_path(pointer)
    if local is not None and not pointer.endswith(".gz"):
        with open(local, "rb") as f:
            doc = json.load(f)
        snaps = doc.get("snapshots") or []
        return [(dict(s.get("summary") or {}), int(s["snapshot-id"]), int(s["timestamp-ms"])) for s in snaps]
    from pyiceberg.table import StaticTable

    meta = StaticTable.from_metadata(pointer, reader._io_properties()).metadata  # noqa: SLF001
    return [(summary_properties(s.summary), s.snapshot_id, s.timestamp_ms) for s in meta.snapshots]


def summary_properties(summary: Any) -> dict[str, Any]:
    """A pyiceberg ``Summary`` as the metadata file's ``summary`` object. Iterating the model itself
    yields pydantic's ``(field, value)`` pairs, not its keys: the properties are ``additional_properties``."""
    if summary is None:
        return {}
    return {"operation": str(summary.operation.value), **summary.additional_properties}


def _delta_commits(catalog: CatalogSpec, table: TableIdentifier) -> list[tuple[dict[str, Any], int, int]]:
    """``(userMetadata as a dict, version, timestamp ms)`` of a local Delta table's newest commits."""
    from pathlib import Path

    from airflow_tablemgmt.metadata.table_paths import local_path, table_location

    root = local_path(table_location(catalog, table))
    if root is None:
        return []  # an object store: read by the job only (docs/adr/0002)
    logs = sorted(Path(root, "_delta_log").glob("*.json"))[-NEWEST:]
    out = []
    for path in logs:
        for line in path.read_text(encoding="utf-8").splitlines():
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if not isinstance(info, dict) or not info.get("userMetadata"):
                continue
            try:
                mark = json.loads(info["userMetadata"])
            except ValueError:
                continue
            if isinstance(mark, dict):
                out.append((mark, int(path.stem), int(info.get("timestamp") or 0)))
    return out


def committed_in_table(table: TableSpec, catalog: CatalogSpec, process: Process) -> dict[str, Any] | None:
    """The newest commit an earlier attempt of ``process`` marked in the table, as a result record
    (``attempt``, ``summary``, ``snapshot_id``); None when there is none or the table cannot be read."""
    ident = TableIdentifier(table.catalog, table.namespace, table.name)
    try:
        if table.format == TableFormat.ICEBERG:
            commits = _iceberg_commits(catalog, ident)
        elif table.format == TableFormat.DELTA:
            commits = _delta_commits(catalog, ident)
        else:
            return None
    except Exception as e:  # noqa: BLE001 - no answer: the job runs again, as without the mark
        log.warning("tablemgmt: process %s: could not read %s's commits for an earlier attempt's mark: %s",
                    process.id, ident, str(e)[:300])  # fmt: skip
        return None
    for summary, commit_id, ts in reversed(commits[-NEWEST:]):
        attempt = _matches(summary, process, ts)
        if attempt is None:
            continue
        snapshot = commit_id if table.format == TableFormat.ICEBERG else None
        return {
            "attempt": attempt,
            "snapshot_id": snapshot,
            "application_id": None,
            "summary": {
                "recorded_from_table": True,
                "committed_commit": commit_id,
                "committed_at_ms": ts,
                "operation": summary.get("operation"),
                "note": "the attempt that committed could not record its result, and its result file is not "
                "on this host; the table's commit metadata names it, so the job was not run again",
            },
        }
    return None
