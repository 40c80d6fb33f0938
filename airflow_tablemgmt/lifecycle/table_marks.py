"""Recovery without shared storage: did an earlier attempt commit? Ask the table.

The result file (:mod:`.results`) is local to the worker that wrote it; a retry on another host (two
Celery workers with their own ``$AIRFLOW_HOME``) cannot see it. The job also marks its commits with its
process id, attempt and action (``spark/job/commit_mark.py``): an Iceberg snapshot's summary, a Delta
commit's ``userMetadata``, a Hudi compaction commit's extra metadata, a plugin format's commit (Paimon:
the snapshot's commit user), read through its factory's ``commit_marks``. :func:`committed_in_table` reads
the table's metadata (no Spark; local or on S3 with the catalog's ``spark.hadoop.fs.s3a.*``, as the
format's health does) and returns what :func:`~.results.record_predecessor_success` records: SUCCESS
without running the job again.

A mark counts only when it names this process, this action and an earlier attempt, and was committed
after the process row was created (a process id repeats in another store). An unreadable table is no
answer: the job runs again, as it did before the mark existed.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.metadata.errors import PathNotFound
from airflow_tablemgmt.spark.job.commit_mark import ACTION, ATTEMPT, PROCESS, parse_text

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

log = logging.getLogger("airflow_tablemgmt.lifecycle")

#: How many of the newest commits are looked at (a job's marks are among the last ones); on an object
#: store, where each is a request, fewer.
NEWEST = 200
NEWEST_REMOTE = 50
_DELTA_COMMIT = re.compile(r"^\d{20}\.json$")
#: A completed Hudi commit (a compaction completes as a ``commit``): ``<instant>[_<completion>].commit``.
_HUDI_COMMIT = re.compile(r"^(\d{14,17})(?:_(\d{14,17}))?\.commit$")


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


def _delta_commits(catalog: CatalogSpec, table: TableIdentifier) -> Iterator[tuple[dict[str, Any], int, int]]:
    """``(userMetadata as a dict, version, timestamp ms)`` of a Delta table's newest commits, newest
    first, from its ``_delta_log`` on local disk or on S3 (the catalog's ``spark.hadoop.fs.s3a.*``)."""
    from airflow_tablemgmt.metadata.table_dir import open_table_dir
    from airflow_tablemgmt.metadata.table_paths import table_location

    log_dir = open_table_dir(table_location(catalog, table), catalog.properties, "Delta log")
    names = sorted(e.name for e in log_dir.list("_delta_log") if _DELTA_COMMIT.match(e.name))
    for name in reversed(names[-(NEWEST if log_dir.access is None else NEWEST_REMOTE) :]):
        for line in log_dir.read_text(f"_delta_log/{name}").splitlines():
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if not isinstance(info, dict):
                continue
            mark = parse_text(info.get("userMetadata"))
            if mark is not None:
                yield mark, int(name.split(".")[0]), int(info.get("timestamp") or 0)
            break  # one commitInfo per commit


def _hudi_commits(catalog: CatalogSpec, table: TableIdentifier) -> Iterator[tuple[dict[str, Any], int, int]]:
    """``(extra metadata, instant, completion ms)`` of a Hudi table's newest completed commits, newest
    first: a compaction's commit carries the job's mark in its extra metadata (``spark/job/commit_mark.py``). Hudi 1.x
    writes the commit metadata as Avro, 0.x as JSON; the completion time (``<instant>_<completion>``) is
    read as this host's local time, Hudi's default timeline zone."""
    from airflow_tablemgmt.formats.hudi.metadata import HOODIE
    from airflow_tablemgmt.metadata.avro_file import is_avro, records
    from airflow_tablemgmt.metadata.table_dir import open_table_dir
    from airflow_tablemgmt.metadata.table_paths import table_location

    root = open_table_dir(table_location(catalog, table), catalog.properties, "Hudi timeline")
    where = f"{HOODIE}/timeline"
    try:
        entries = root.list(where)
    except PathNotFound:  # Hudi 0.x: the timeline is .hoodie/ itself
        where, entries = HOODIE, root.list(HOODIE)
    done = sorted((m.group(2) or m.group(1), e.name) for e in entries if (m := _HUDI_COMMIT.match(e.name)))
    for completed, name in reversed(done[-(NEWEST_REMOTE if root.access is not None else NEWEST) :]):
        data = root.read_bytes(f"{where}/{name}")
        if is_avro(data):
            extra = (records(data) or [{}])[0].get("extraMetadata")
        else:
            extra = json.loads(data.decode("utf-8") or "{}").get("extraMetadata")
        if isinstance(extra, dict) and extra.get(PROCESS) is not None:
            yield extra, int(name.split("_")[0].split(".")[0]), _hudi_ms(completed)


def _hudi_ms(instant: str) -> int:
    from datetime import datetime

    fmt = "%Y%m%d%H%M%S%f" if len(instant) > 14 else "%Y%m%d%H%M%S"
    value = instant if len(instant) == 14 else instant[:14] + instant[14:].ljust(6, "0")
    return int(datetime.strptime(value, fmt).timestamp() * 1000)


def _plugin_commits(
    table: TableSpec, catalog: CatalogSpec, action: str
) -> Iterator[tuple[dict[str, Any], int, int]]:
    """A plugin format's marks: its factory's optional ``commit_marks(table, catalog)``, the table's
    newest commits newest first as ``(mark text, commit id, committed at ms)``, the text being what the
    job's ``commit_user_prefix()`` (or a JSON mark) left in the commit; nothing without that method."""
    from airflow_tablemgmt.factories.discovery import factories_for

    factory = factories_for(table.format, action).for_action(table.format, action)
    reader = getattr(factory, "commit_marks", None)
    if reader is None:
        return
    for text, commit_id, ts in reader(table, catalog):
        mark = parse_text(text)
        if mark is not None:
            yield mark, int(commit_id), int(ts)


def committed_in_table(table: TableSpec, catalog: CatalogSpec, process: Process) -> dict[str, Any] | None:
    """The newest commit an earlier attempt of ``process`` marked in the table, as a result record
    (``attempt``, ``summary``, ``snapshot_id``); None when there is none or the table cannot be read."""
    ident = TableIdentifier(table.catalog, table.namespace, table.name)
    fmt = str(table.format)
    try:
        if fmt == "iceberg":
            commits: Iterator[tuple[dict[str, Any], int, int]] = reversed(
                _iceberg_commits(catalog, ident)[-NEWEST:]
            )
        elif fmt == "delta":
            commits = _delta_commits(catalog, ident)
        elif fmt == "hudi":
            commits = _hudi_commits(catalog, ident)
        else:
            commits = _plugin_commits(table, catalog, process.action)
        found = next(
            ((m, c, t, a) for m, c, t in commits if (a := _matches(m, process, t)) is not None), None
        )
    except Exception as e:  # noqa: BLE001 - no answer: the job runs again, as without the mark
        log.warning(
            "tablemgmt: process %s: could not read %s's commits for an earlier attempt's mark: %s",
            process.id,
            ident,
            str(e)[:300],
        )
        return None
    if found is None:
        return None
    summary, commit_id, ts, attempt = found
    return {
        "attempt": attempt,
        "snapshot_id": commit_id if fmt == "iceberg" else None,
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
