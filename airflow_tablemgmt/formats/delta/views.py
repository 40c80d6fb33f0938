"""Delta's table views (``factories/delta.py`` declares them): Details, Files and the log's versions as the
Snapshots view, read from the ``_delta_log`` without a JVM.

The table's state (live files, version, properties, partition columns) is ``formats/delta/metadata.py``'s
:func:`read_delta`. What it does not keep is read here from the JSON commits still in the log: each
version's ``commitInfo`` (operation, timestamp), its added and removed files, bytes and records (an add's
``stats.numRecords``), the newest ``metaData`` (schema) and ``protocol``; a file's record count from the
newest checkpoint when its add is older than the JSON commits. Versions whose JSON commit Delta has
already cleaned up are not listed (the checkpoint keeps the state, not the history). A table on S3 is read
as ``read_delta`` reads it, through ``metadata/table_dir.py`` with the catalog's ``spark.hadoop.fs.s3a.*``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from airflow_tablemgmt.formats.delta.metadata import LOG_DIR, OPTIMIZE_TARGET_BYTES, read_delta
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.format_views import LiveFile, details_view, files_view, naming_the_table
from airflow_tablemgmt.metadata.table_dir import PathNotFound, TableDir, open_table_dir
from airflow_tablemgmt.metadata.table_paths import table_location

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10})?\.parquet$")
#: Log versions listed at most by the Snapshots view (the newest); ``versions_in_log`` counts all.
MAX_VERSIONS = 1000


def _open(catalog: Any, table: Any) -> tuple[str, TableDir]:
    location = table_location(catalog, table.identifier)
    return location, open_table_dir(location, catalog.properties, "Delta log")


def _names(log: TableDir) -> list[str]:
    try:
        return [e.name for e in log.list(LOG_DIR) if not e.is_dir]
    except PathNotFound:
        raise HealthUnavailable(f"{log.location}: not a Delta table (no {LOG_DIR}/ there)") from None


def _commits(names: list[str]) -> list[int]:
    return sorted(int(m.group(1)) for n in names if (m := _COMMIT.match(n)))


def _read_commit(log: TableDir, version: int) -> list[dict[str, Any]]:
    rel = f"{LOG_DIR}/{version:020d}.json"
    try:
        return [json.loads(line) for line in log.read_text(rel).splitlines() if line.strip()]
    except (ValueError, PathNotFound) as e:  # torn, or cleaned up between the listing and the read
        raise HealthUnavailable(f"{log.location}/{rel}: unreadable Delta commit: {e}") from None


def _newest_first(log: TableDir, versions: list[int]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    for v in reversed(versions):
        yield v, _read_commit(log, v)


def _records(stats: Any) -> int | None:
    if not stats:
        return None
    try:
        value = json.loads(stats).get("numRecords") if isinstance(stats, str) else stats.get("numRecords")
    except (ValueError, AttributeError):
        return None
    return int(value) if value is not None else None


def _iso(ms: Any) -> str | None:
    try:
        return datetime.fromtimestamp(int(ms) / 1000, UTC).isoformat()
    except (TypeError, ValueError):
        return None


def _checkpoint(log: TableDir, names: list[str], columns: list[str]) -> list[dict[str, Any]]:
    """Rows of ``columns`` of the newest checkpoint (every part), as dicts; [] when there is none."""
    parts: dict[int, list[str]] = {}
    for n in names:
        if m := _CHECKPOINT.match(n):
            parts.setdefault(int(m.group(1)), []).append(n)
    if not parts:
        return []
    rows: list[dict[str, Any]] = []
    for part in sorted(parts[max(parts)]):
        table = log.read_parquet(f"{LOG_DIR}/{part}")
        present = [c for c in columns if c in table.column_names]
        rows.extend(table.select(present).to_pylist())
    return rows


def _columns(schema_string: str | None) -> list[dict[str, Any]] | None:
    try:
        fields = json.loads(schema_string or "")["fields"]
    except (ValueError, KeyError, TypeError):
        return None
    out = []
    for f in fields:
        kind = f.get("type")
        out.append(
            {
                "name": f["name"],
                "type": kind if isinstance(kind, str) else json.dumps(kind),
                "required": not f.get("nullable", True),
                "doc": (f.get("metadata") or {}).get("comment"),
            }
        )
    return out


@naming_the_table
def read_details(catalog: Any, table: Any) -> dict[str, Any]:
    """Location, properties (the table's ``configuration``), schema (``metaData.schemaString``), partition
    columns, the protocol versions and figures: live files and bytes, the version, log commits kept."""
    location, log = _open(catalog, table)
    state = read_delta(location, catalog.properties)
    names = _names(log)
    versions = _commits(names)
    meta: dict[str, Any] | None = None
    protocol: dict[str, Any] | None = None
    last_ts: Any = None
    for _, actions in _newest_first(log, versions):
        for a in actions:
            if last_ts is None and "commitInfo" in a:
                last_ts = a["commitInfo"].get("timestamp")
            meta = meta or a.get("metaData")
            protocol = protocol or a.get("protocol")
        if meta is not None and protocol is not None:
            break
    if meta is None or protocol is None:
        for row in _checkpoint(log, names, ["metaData", "protocol"]):
            meta = meta or row.get("metaData")
            protocol = protocol or row.get("protocol")
    version = (
        f"{protocol.get('minReaderVersion')}/{protocol.get('minWriterVersion')} (reader/writer)"
        if protocol
        else None
    )
    figures = {
        "version": state.version,
        "data_files": state.data_files,
        "total_bytes": state.total_bytes,
        "log_commits": len(versions),
        "commits_since_optimize": state.changes.commits,
        "last_optimize_version": state.changes.last_optimize_version,
    }
    return details_view(
        location=location,
        properties=state.properties,
        figures=figures,
        current=state.version,
        last_updated=_iso(last_ts),
        format_version=version,
        columns=_columns((meta or {}).get("schemaString")),
        partition_columns=state.partition_columns,
    )


def _partition(path: str) -> str:
    head = path.rpartition("/")[0]
    return "/".join(p for p in head.split("/") if "=" in p)


@naming_the_table
def read_files(catalog: Any, table: Any) -> dict[str, Any]:
    """The live files (``read_delta``) per partition against the table's OPTIMIZE target
    (``delta.targetFileSize``, else 1 GiB), each with its record count from its add's stats."""
    location, log = _open(catalog, table)
    state = read_delta(location, catalog.properties)
    names = _names(log)
    records: dict[str, int | None] = {}
    wanted = set(state.files)
    for _, actions in _newest_first(log, _commits(names)):
        for a in actions:
            if "add" in a and a["add"]["path"] in wanted:
                records[a["add"]["path"]] = _records(a["add"].get("stats"))
                wanted.discard(a["add"]["path"])
        if not wanted:
            break
    if wanted:
        for row in _checkpoint(log, names, ["add"]):
            add = row.get("add")
            if add is not None and add.get("path") in wanted:
                records[add["path"]] = _records(add.get("stats"))
    target = int(state.properties.get("delta.targetFileSize") or OPTIMIZE_TARGET_BYTES)
    files = [LiveFile(p, _partition(p), size, records.get(p)) for p, size in state.files.items()]
    return files_view(files, target, snapshot_id=state.version, compaction_action="optimize")


@naming_the_table
def read_snapshots(catalog: Any, table: Any) -> dict[str, Any]:
    """The log's versions still held as JSON commits, oldest first (at most :data:`MAX_VERSIONS`, the
    newest): operation and timestamp (``commitInfo``), files and bytes added and removed, records added
    (the adds' stats; null when an add has none)."""
    location, log = _open(catalog, table)
    versions = _commits(_names(log))
    if not versions:
        read_delta(location, catalog.properties)  # a checkpoint alone, or no Delta table: say which
    current = versions[-1] if versions else None
    out = []
    for v in versions[-MAX_VERSIONS:]:
        actions = _read_commit(log, v)
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        adds = [a["add"] for a in actions if "add" in a]
        removes = [a["remove"] for a in actions if "remove" in a]
        added = [_records(x.get("stats")) for x in adds]
        removed = [_records(x.get("stats")) for x in removes]
        out.append(
            {
                "snapshot_id": str(v),
                "parent_id": str(v - 1) if v > 0 else None,  # the log is linear
                "committed_at": _iso(info.get("timestamp")),
                "operation": info.get("operation"),
                "current": v == current,
                "added_data_files": len(adds),
                "removed_data_files": len(removes),
                "added_delete_files": None,
                "removed_delete_files": None,
                "added_records": None if None in added else sum(added),  # type: ignore[arg-type]
                "removed_records": None if None in removed else sum(removed),  # type: ignore[arg-type]
                "added_bytes": sum(int(x.get("size") or 0) for x in adds),
                "removed_bytes": sum(int(x.get("size") or 0) for x in removes)
                if all("size" in x for x in removes)
                else None,
                "total_records": None,
                "total_data_files": None,
            }
        )
    return {
        "current_snapshot_id": str(current) if current is not None else None,
        "entry_label": "log versions",
        "versions_in_log": len(versions),
        "snapshots": out,
    }


VIEWS = {"details": read_details, "files": read_files, "snapshots": read_snapshots}
