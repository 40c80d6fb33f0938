"""Hudi's table views (``factories/hudi.py`` declares them): Details, Files and the completed instants as the
Snapshots view, read from ``.hoodie`` and the table's directory without a JVM.

The timeline and its figures are ``formats/hudi/metadata.py``'s (:func:`read_timeline`, :func:`hudi_health`);
``hoodie.properties`` gives the properties, the schema the table was created with
(``hoodie.table.create.schema``, Avro) and the partition fields. The Files view lists each file group's
latest file slice from the directory: its newest base file and the log files written on it (shown as
delete files: merge-on-read changes not compacted yet); files of an instant still pending are left out,
and a file group a clustering replaced still counts until a clean deletes its files (which of them were
replaced is in the replacecommit's metadata, Avro in Hudi 1.x, not read here).
Hudi records file sizes on disk and row counts only in its commit metadata, so records are null.
An instant's time is Hudi's instant (``yyyyMMddHHmmss[SSS]``) in the table's timeline time zone
(``hoodie.table.timeline.timezone``: UTC, else this host's local time). A table on S3 is read as the
timeline is, through ``metadata/table_dir.py`` with the catalog's ``spark.hadoop.fs.s3a.*``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from airflow_tablemgmt.formats.hudi.metadata import HOODIE, hoodie_properties, hudi_health, read_timeline
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.format_views import LiveFile, details_view, files_view, naming_the_table
from airflow_tablemgmt.metadata.table_dir import TableDir, open_table_dir
from airflow_tablemgmt.metadata.table_paths import table_location

_LOG_FILE = re.compile(r"^\.(.+)_(\d{14,17})\.log\.\d+(?:_[\d-]+)?$")
_BASE_FILE = re.compile(r"^(.+?)_[\d-]+_(\d{14,17})\.(?:parquet|orc|hfile)$")
#: Hudi's default base file size (``hoodie.parquet.max.file.size``, 120 MiB) when the table sets none.
DEFAULT_MAX_FILE_BYTES = 120 * 1024 * 1024


def _files(table: TableDir) -> Iterator[tuple[str, str, int]]:
    """(partition directory, file name, size) of every file below the root, ``.hoodie`` skipped."""
    import pyarrow.fs as pafs

    try:
        infos = table.filesystem.get_file_info(pafs.FileSelector(table.root, recursive=True))
    except Exception as e:  # noqa: BLE001 - pyarrow raises OSError subclasses and ArrowException
        reason = table.scrub(" ".join(str(e).split()))[:300]
        raise HealthUnavailable(
            f"{table.location}: the table's files could not be listed ({reason})"
        ) from None
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(table.root) :].strip("/")
        partition, _, name = rel.rpartition("/")
        if partition.split("/")[0] != HOODIE:
            yield partition, name, int(info.size or 0)


def _time(instant: str | None, zone: str) -> str | None:
    if not instant:
        return None
    try:
        when = datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(
            microsecond=int(instant[14:17] or 0) * 1000
        )
    except ValueError:
        return None
    return (when.replace(tzinfo=UTC) if zone.upper() == "UTC" else when.astimezone()).isoformat()


def _columns(schema: str | None) -> list[dict[str, Any]] | None:
    try:
        fields = json.loads(schema or "")["fields"]
    except (ValueError, KeyError, TypeError):
        return None
    out = []
    for f in fields:
        kind = f.get("type")
        types = kind if isinstance(kind, list) else [kind]
        shown = [
            t if isinstance(t, str) else str(t.get("logicalType") or t.get("type"))
            for t in types
            if t != "null"
        ]
        out.append(
            {"name": f["name"], "type": "|".join(shown), "required": "null" not in types, "doc": f.get("doc")}
        )
    return out


@naming_the_table
def read_details(catalog: Any, table: Any) -> dict[str, Any]:
    """Location, ``hoodie.properties``, the create schema, the partition fields, the table version and the
    figures of ``hudi_health`` (table type, timeline and file group counts)."""
    location = table_location(catalog, table.identifier)
    props = hoodie_properties(open_table_dir(location, catalog.properties, "Hudi table"))
    figures = {k: v for k, v in hudi_health(location, catalog.properties).items() if k != "format"}
    zone = props.get("hoodie.table.timeline.timezone", "LOCAL")
    fields = [f.split(":")[0] for f in props.get("hoodie.table.partition.fields", "").split(",") if f]
    return details_view(
        location=location,
        properties=props,
        figures=figures,
        current=figures.get("latest_instant"),
        last_updated=_time(figures.get("latest_instant"), zone),
        format_version=props.get("hoodie.table.version"),
        columns=_columns(props.get("hoodie.table.create.schema")),
        partition_columns=fields,
    )


@naming_the_table
def read_files(catalog: Any, table: Any) -> dict[str, Any]:
    """Each file group's latest slice per partition directory against ``hoodie.parquet.max.file.size``."""
    location = table_location(catalog, table.identifier)
    timeline = read_timeline(location, catalog.properties)
    directory = open_table_dir(location, catalog.properties, "Hudi table")
    props = hoodie_properties(directory)
    pending = {i for i, _, _ in timeline.pending}
    base: dict[tuple[str, str], tuple[str, str, int]] = {}  # (partition, group) -> (instant, path, size)
    logs: dict[tuple[str, str], list[tuple[str, str, int]]] = {}
    for partition, name, size in _files(directory):
        m = _BASE_FILE.match(name) or _LOG_FILE.match(name)
        if m is None or m.group(2) in pending:
            continue
        entry = (m.group(2), f"{partition}/{name}" if partition else name, size)
        key = (partition, m.group(1))
        if name.startswith("."):
            logs.setdefault(key, []).append(entry)
        elif key not in base or entry[0] > base[key][0]:
            base[key] = entry
    files: list[LiveFile] = []
    for key in sorted(set(base) | set(logs)):
        since = base[key][0] if key in base else ""
        if key in base:
            files.append(LiveFile(base[key][1], key[0], base[key][2]))
        files.extend(LiveFile(p, key[0], size, delete=True) for i, p, size in logs.get(key, []) if i >= since)
    target = int(props.get("hoodie.parquet.max.file.size") or DEFAULT_MAX_FILE_BYTES)
    return files_view(files, target, snapshot_id=timeline.latest_instant, compaction_action="clustering")


@naming_the_table
def read_snapshots(catalog: Any, table: Any) -> dict[str, Any]:
    """The active timeline's completed instants, oldest first: the action (a ``commit`` requested as a
    compaction is ``compaction``, a ``replacecommit`` requested as a clustering ``clustering``) and the
    instant's time; ``pending`` lists the instants requested or inflight."""
    location = table_location(catalog, table.identifier)
    timeline = read_timeline(location, catalog.properties)
    directory = open_table_dir(location, catalog.properties, "Hudi table")
    zone = hoodie_properties(directory).get("hoodie.table.timeline.timezone", "LOCAL")
    compactions = set(timeline.completed_compactions())
    ours = timeline.maintenance_instants()
    latest = timeline.latest_instant
    out = []
    previous = None
    for instant, action in timeline.completed:
        operation = "compaction" if instant in compactions else "clustering" if instant in ours else action
        out.append(
            {
                "snapshot_id": instant,
                "parent_id": previous,
                "committed_at": _time(instant, zone),
                "operation": operation,
                "action": action,
                "current": instant == latest,
                "added_data_files": None,
                "removed_data_files": None,
                "added_delete_files": None,
                "removed_delete_files": None,
                "added_records": None,
                "removed_records": None,
                "added_bytes": None,
                "removed_bytes": None,
                "total_records": None,
                "total_data_files": None,
            }
        )
        previous = instant
    return {
        "current_snapshot_id": latest,
        "entry_label": "completed instants",
        "table_type": timeline.table_type,
        "snapshots": out,
        "pending": [{"snapshot_id": i, "operation": a, "state": s} for i, a, s in timeline.pending],
    }


VIEWS = {"details": read_details, "files": read_files, "snapshots": read_snapshots}
