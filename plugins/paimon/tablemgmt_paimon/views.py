"""Paimon's table views (``Format.views`` of its descriptor, ``format.py``): Details, Files and Snapshots of a table on a local
warehouse, read from its snapshot, schema and data files without a JVM.

* **details**: the schema of the latest snapshot (``schema/schema-<id>``: fields, partition and primary
  keys, options as the properties) and figures (snapshots, records, data files on disk, commits since the
  last compaction);
* **files**: the data files on disk under ``[<partition>/]bucket-<n>/`` per partition against the table's
  ``target-file-size`` (Paimon's default 128 MiB). Manifests (Avro) are not read, so a file a snapshot no
  longer references counts until ``expire-snapshots`` or ``remove-orphans`` deletes it, and records are null;
* **snapshots**: every snapshot file, oldest first: commit kind, time, total records and the records the
  snapshot added net of those it removed (``deltaRecordCount`` as ``net_records``).

A table not on a local warehouse raises ``HealthUnavailable`` (the page and the REST API say why).
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_tablemgmt.formats.api import (
    HealthUnavailable,
    LiveFile,
    details_view,
    files_view,
)
from tablemgmt_paimon.snapshots import DATA_SUFFIXES, NotReadable, local_path, table_location

#: Paimon's ``target-file-size`` when the table sets none.
DEFAULT_TARGET_BYTES = 128 * 1024 * 1024
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3, "gb": 1024**3}


def _root(catalog: Any, table: Any) -> tuple[str, Path]:
    location = table_location(catalog.warehouse or "", table.namespace, table.name)
    try:
        root = local_path(location)
    except NotReadable as e:
        raise HealthUnavailable(f"table {table.id}: {e}") from None
    if not (root / "snapshot").is_dir():
        raise HealthUnavailable(
            f"table {table.id}: {location}: no snapshot directory (not a Paimon table, or never written)"
        )
    return location, root


def _json_files(directory: Path, prefix: str) -> list[dict[str, Any]]:
    out = []
    for entry in directory.iterdir() if directory.is_dir() else ():
        if not entry.name.startswith(prefix):
            continue
        try:
            out.append(json.loads(entry.read_text()))
        except (OSError, ValueError):
            continue  # expired between the listing and the read, or being written
    return sorted(out, key=lambda d: int(d.get("id", 0)))


def _iso(ms: Any) -> str | None:
    try:
        return datetime.fromtimestamp(int(ms) / 1000, UTC).isoformat()
    except (TypeError, ValueError):
        return None


def _bytes(text: str | None) -> int | None:
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text or "")
    if m is None or m.group(2).lower() not in _UNITS:
        return None
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def _schema(root: Path, snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    schemas = _json_files(root / "schema", "schema-")
    wanted = snapshots[-1].get("schemaId") if snapshots else None
    return next((s for s in schemas if s.get("id") == wanted), schemas[-1] if schemas else {})


def read_details(catalog: Any, table: Any) -> dict[str, Any]:
    location, root = _root(catalog, table)
    snapshots = _json_files(root / "snapshot", "snapshot-")
    schema = _schema(root, snapshots)
    latest = snapshots[-1] if snapshots else {}
    columns = [
        {
            "id": f.get("id"),
            "name": f["name"],
            "type": str(f.get("type", "")).replace(" NOT NULL", ""),
            "required": str(f.get("type", "")).endswith("NOT NULL"),
            "doc": f.get("description"),
        }
        for f in schema.get("fields", [])
    ]
    files = _data_files(root)
    since = 0
    for s in reversed(snapshots):
        if s.get("commitKind") in ("COMPACT", "OVERWRITE"):
            break
        since += s.get("commitKind") == "APPEND"
    figures = {
        "snapshots": len(snapshots),
        "latest_snapshot": latest.get("id"),
        "records": latest.get("totalRecordCount"),
        "primary_keys": ", ".join(schema.get("primaryKeys", [])) or None,
        "data_files_on_disk": len(files),
        "data_bytes_on_disk": sum(f.size for f in files),
        "commits_since_compaction": since,
    }
    details = details_view(
        location=location,
        properties=schema.get("options", {}),
        figures=figures,
        current=latest.get("id"),
        last_updated=_iso(latest.get("timeMillis")),
        format_version=latest.get("version"),
        columns=columns,
        partition_columns=schema.get("partitionKeys", []),
        schema_id=schema.get("id"),
    )
    return details


def _data_files(root: Path) -> list[LiveFile]:
    files = []
    for dirpath, _, names in os.walk(root):
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        parts = rel.split("/")
        if not parts[-1].startswith("bucket-"):
            continue
        partition = "/".join(parts[:-1])
        for name in names:
            if name.endswith(DATA_SUFFIXES) and not name.startswith("."):
                files.append(LiveFile(f"{rel}/{name}", partition, (Path(dirpath) / name).stat().st_size))
    return files


def read_files(catalog: Any, table: Any) -> dict[str, Any]:
    _, root = _root(catalog, table)
    snapshots = _json_files(root / "snapshot", "snapshot-")
    target = (
        _bytes(_schema(root, snapshots).get("options", {}).get("target-file-size")) or DEFAULT_TARGET_BYTES
    )
    latest = snapshots[-1].get("id") if snapshots else None
    return files_view(_data_files(root), target, snapshot_id=latest, compaction_action="compact")


def read_snapshots(catalog: Any, table: Any) -> dict[str, Any]:
    _, root = _root(catalog, table)
    snapshots = _json_files(root / "snapshot", "snapshot-")
    latest = snapshots[-1].get("id") if snapshots else None
    out = []
    previous = None
    for s in snapshots:
        out.append(
            {
                "snapshot_id": str(s.get("id")),
                "parent_id": previous,
                "committed_at": _iso(s.get("timeMillis")),
                "operation": s.get("commitKind"),
                "current": s.get("id") == latest,
                "added_data_files": None,
                "removed_data_files": None,
                "added_delete_files": None,
                "removed_delete_files": None,
                "added_records": None,
                "removed_records": None,
                "added_bytes": None,
                "removed_bytes": None,
                "total_records": s.get("totalRecordCount"),
                "total_data_files": None,
                "net_records": s.get("deltaRecordCount"),
            }
        )
        previous = str(s.get("id"))
    return {
        "current_snapshot_id": str(latest) if latest is not None else None,
        "entry_label": "snapshots",
        "snapshots": out,
    }
