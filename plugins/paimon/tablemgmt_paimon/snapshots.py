"""A Paimon table read without a JVM: its snapshots (``<table>/snapshot/snapshot-<id>``, JSON) and its files
on a local warehouse. The factory reads it to skip a run that would not pay; the tests to check an
action's effect independently of Spark.

Layout of Paimon's filesystem catalog: ``<warehouse>/<database>.db/<table>/`` with ``snapshot/``,
``manifest/``, ``schema/`` and the data files under ``[<partition>=<value>/]bucket-<n>/``.
Manifests (Avro) are not read: the data files counted are those on disk, referenced or not.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

DATA_SUFFIXES = (".parquet", ".orc", ".avro")


class NotReadable(Exception):
    """The table cannot be read here (not on a local filesystem, or not a Paimon table)."""


def table_location(warehouse: str, namespace: str, name: str) -> str:
    return f"{warehouse.rstrip('/')}/{namespace}.db/{name}"


def local_path(location: str) -> Path:
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        raise NotReadable(f"{location}: not on a local filesystem ({parsed.scheme}://)")
    return Path(parsed.path if parsed.scheme else location)


@dataclass(frozen=True)
class Snapshot:
    id: int
    commit_kind: str
    time_millis: int
    total_record_count: int | None
    commit_user: str = ""


@dataclass
class TableState:
    """The snapshots on disk (oldest first) and the data files under the table's directory."""

    snapshots: list[Snapshot] = field(default_factory=list)
    data_files: int = 0
    data_bytes: int = 0

    @property
    def latest(self) -> Snapshot | None:
        return self.snapshots[-1] if self.snapshots else None

    def commits_since_compaction(self) -> int:
        """APPEND snapshots after the newest compaction (a COMPACT snapshot, or the OVERWRITE a sort
        compaction commits); all of them if there is none."""
        count = 0
        for snapshot in reversed(self.snapshots):
            if snapshot.commit_kind in ("COMPACT", "OVERWRITE"):
                break
            if snapshot.commit_kind == "APPEND":
                count += 1
        return count

    def figures(self) -> dict[str, int | None]:
        latest = self.latest
        return {
            "snapshots": len(self.snapshots),
            "latest_snapshot": latest.id if latest else None,
            "records": latest.total_record_count if latest else None,
            "data_files_on_disk": self.data_files,
            "data_bytes_on_disk": self.data_bytes,
            "commits_since_compaction": self.commits_since_compaction(),
        }


def read_table(location: str) -> TableState:
    root = local_path(location)
    snapshot_dir = root / "snapshot"
    if not snapshot_dir.is_dir():
        raise NotReadable(f"{location}: no snapshot directory (not a Paimon table, or never written)")
    snapshots = []
    for entry in snapshot_dir.iterdir():
        if not entry.name.startswith("snapshot-"):
            continue
        try:
            raw = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue  # expired between the listing and the read, or being written
        snapshots.append(
            Snapshot(
                int(raw["id"]),
                str(raw.get("commitKind", "")),
                int(raw.get("timeMillis", 0)),
                raw.get("totalRecordCount"),
                str(raw.get("commitUser") or ""),
            )
        )
    snapshots.sort(key=lambda s: s.id)
    state = TableState(snapshots)
    for dirpath, _, files in os.walk(root):
        if "bucket-" not in dirpath:
            continue
        for name in files:
            if name.endswith(DATA_SUFFIXES) and not name.startswith("."):
                state.data_files += 1
                state.data_bytes += (Path(dirpath) / name).stat().st_size
    return state
