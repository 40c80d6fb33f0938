"""A Delta table's state from its ``_delta_log`` without a JVM: the live files, the version, and what was
written since the last ``OPTIMIZE``.

The log is the newest checkpoint (``<v>.checkpoint.parquet``, or its parts, read with pyarrow) plus the
JSON commits after it; ``_last_checkpoint`` names the checkpoint when present, else the directory is
listed. Commits older than the checkpoint are read only to find the last ``OPTIMIZE``, as far back as
the log still holds them (``changes since`` then counts from the oldest commit kept).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.table_paths import local_path

LOG_DIR = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10})?\.parquet$")
OPTIMIZE_OPERATION = "OPTIMIZE"


@dataclass(frozen=True)
class DeltaChanges:
    """What was committed after the last ``OPTIMIZE`` (or since the oldest commit the log holds)."""

    commits: int = 0
    files_added: int = 0
    files_removed: int = 0
    last_optimize_version: int | None = None


@dataclass(frozen=True)
class DeltaState:
    """The table at its newest version."""

    location: str
    version: int
    files: dict[str, int] = field(default_factory=dict)  # live path (relative, as logged) -> size
    changes: DeltaChanges = field(default_factory=DeltaChanges)
    properties: dict[str, str] = field(default_factory=dict)
    partition_columns: tuple[str, ...] = ()

    @property
    def data_files(self) -> int:
        return len(self.files)

    @property
    def total_bytes(self) -> int:
        return sum(self.files.values())

    def summary(self) -> dict[str, Any]:
        """Figures for a process summary (``current_snapshot_id`` is the Delta version)."""
        return {
            "current_snapshot_id": self.version,
            "data_files": self.data_files,
            "total_bytes": self.total_bytes,
            "commits_since_optimize": self.changes.commits,
            "files_added_since_optimize": self.changes.files_added,
        }


def read_delta(location: str) -> DeltaState:
    """The Delta table at ``location`` (a local path or ``file:`` URI). Raises HealthUnavailable."""
    root = local_path(location)
    if root is None:
        raise HealthUnavailable(
            f"{location}: only local Delta logs are read without a JVM today; the job reads the table itself"
        )
    log = Path(root) / LOG_DIR
    try:
        names = os.listdir(log)
    except OSError as e:
        raise HealthUnavailable(
            f"{location}: not a Delta table (no readable {LOG_DIR}/: {e.strerror})"
        ) from None
    commits = sorted(int(m.group(1)) for n in names if (m := _COMMIT.match(n)))
    checkpoints = _checkpoint_parts(names)
    checkpoint = _last_checkpoint(log, checkpoints)
    if not commits and checkpoint is None:
        raise HealthUnavailable(f"{location}: {LOG_DIR}/ holds no commit")
    files: dict[str, int] = {}
    properties: dict[str, str] = {}
    partitions: tuple[str, ...] = ()
    start = 0
    if checkpoint is not None:
        files, properties, partitions = _read_checkpoint(log, checkpoints[checkpoint])
        start = checkpoint + 1
    version = checkpoint if checkpoint is not None else -1
    for v in (c for c in commits if c >= start):
        for action in _actions(log, v):
            if "add" in action:
                files[action["add"]["path"]] = int(action["add"].get("size") or 0)
            elif "remove" in action:
                files.pop(action["remove"]["path"], None)
            elif "metaData" in action:
                properties = dict(action["metaData"].get("configuration") or {})
                partitions = tuple(action["metaData"].get("partitionColumns") or ())
        version = v
    return DeltaState(location, version, files, _changes(log, commits), properties, partitions)


def _checkpoint_parts(names: list[str]) -> dict[int, list[str]]:
    parts: dict[int, list[str]] = {}
    for n in names:
        if m := _CHECKPOINT.match(n):
            parts.setdefault(int(m.group(1)), []).append(n)
    return parts


def _last_checkpoint(log: Path, checkpoints: dict[int, list[str]]) -> int | None:
    try:
        version = int(json.loads((log / "_last_checkpoint").read_text())["version"])
        if version in checkpoints:
            return version
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return max(checkpoints) if checkpoints else None


def _read_checkpoint(log: Path, parts: list[str]) -> tuple[dict[str, int], dict[str, str], tuple[str, ...]]:
    import pyarrow.parquet as pq

    files: dict[str, int] = {}
    properties: dict[str, str] = {}
    partitions: tuple[str, ...] = ()
    for part in sorted(parts):
        table = pq.read_table(log / part)
        columns = set(table.column_names)
        if "add" in columns:
            for add in table.column("add").to_pylist():
                if add is not None:
                    files[add["path"]] = int(add.get("size") or 0)
        if "metaData" in columns:
            for meta in table.column("metaData").to_pylist():
                if meta is not None:
                    configuration = meta.get("configuration") or {}
                    # pyarrow reads a parquet map as a list of (key, value) pairs
                    properties = dict(configuration) if not isinstance(configuration, dict) else configuration
                    partitions = tuple(meta.get("partitionColumns") or ())
    return files, properties, partitions


def _actions(log: Path, version: int) -> list[dict[str, Any]]:
    path = log / f"{version:020d}.json"
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        raise HealthUnavailable(f"{path}: unreadable Delta commit: {e}") from None


def _changes(log: Path, commits: list[int]) -> DeltaChanges:
    """Walk the kept commits newest first, counting data changes until the last OPTIMIZE."""
    count = added = removed = 0
    for v in reversed(commits):
        actions = _actions(log, v)
        operation = next((a["commitInfo"].get("operation") for a in actions if "commitInfo" in a), None)
        if operation == OPTIMIZE_OPERATION:
            return DeltaChanges(count, added, removed, v)
        count += 1
        added += sum(1 for a in actions if "add" in a and a["add"].get("dataChange", True))
        removed += sum(1 for a in actions if "remove" in a and a["remove"].get("dataChange", True))
    return DeltaChanges(count, added, removed, None)


#: A live file below this size counts as small in :func:`delta_health` (Delta's OPTIMIZE aims at 1 GiB;
#: a quarter of the 128 MiB Parquet block is the usual "small" line).
SMALL_FILE_BYTES = 32 * 1024 * 1024


def delta_health(
    location: str, small_file_bytes: int = SMALL_FILE_BYTES, *, state: DeltaState | None = None
) -> dict[str, Any]:
    """The table's health figures from its log, without a JVM: live files, small files, the log's size
    (JSON commits kept and their bytes, the newest checkpoint) and what was written since the last
    OPTIMIZE. ``state``: the table already read. Raises HealthUnavailable."""
    state = state if state is not None else read_delta(location)
    root = local_path(location)
    assert root is not None  # read_delta raised otherwise
    log = Path(root) / LOG_DIR
    commits = checkpoint_bytes = commit_bytes = 0
    checkpoint: int | None = None
    for entry in os.scandir(log):
        if _COMMIT.match(entry.name):
            commits += 1
            commit_bytes += entry.stat().st_size
        elif m := _CHECKPOINT.match(entry.name):
            checkpoint = max(checkpoint or 0, int(m.group(1)))
            checkpoint_bytes += entry.stat().st_size
    sizes = list(state.files.values())
    return {
        "format": "delta",
        "version": state.version,
        "data_files": state.data_files,
        "total_bytes": state.total_bytes,
        "small_files": sum(1 for size in sizes if size < small_file_bytes),
        "small_file_bytes": small_file_bytes,
        "log_commits": commits,
        "log_bytes": commit_bytes + checkpoint_bytes,
        "checkpoint_version": checkpoint,
        "commits_since_checkpoint": state.version - (checkpoint if checkpoint is not None else -1),
        "commits_since_optimize": state.changes.commits,
        "files_added_since_optimize": state.changes.files_added,
    }


def ancestry(location: str, depth: int) -> list[tuple[int, bool]]:
    """The newest ``depth`` commits still in the log, newest first: (version, whether it changed data),
    i.e. added or removed a file with ``dataChange`` true (OPTIMIZE and VACUUM do not)."""
    root = local_path(location)
    if root is None:
        raise HealthUnavailable(f"{location}: only local Delta logs are read without a JVM today")
    log = Path(root) / LOG_DIR
    try:
        versions = sorted((int(m.group(1)) for n in os.listdir(log) if (m := _COMMIT.match(n))), reverse=True)
    except OSError as e:
        raise HealthUnavailable(
            f"{location}: not a Delta table (no readable {LOG_DIR}/: {e.strerror})"
        ) from None
    out: list[tuple[int, bool]] = []
    for v in versions[:depth]:
        actions = _actions(log, v)
        changed = any(
            (kind in a and a[kind].get("dataChange", True)) for a in actions for kind in ("add", "remove")
        )
        out.append((v, changed))
    return out


def latest_version(location: str) -> int | None:
    """The newest commit's version from the log's listing alone (no commit read): the cheap poll."""
    root = local_path(location)
    if root is None:
        raise HealthUnavailable(f"{location}: only local Delta logs are read without a JVM today")
    try:
        names = os.listdir(Path(root) / LOG_DIR)
    except OSError as e:
        raise HealthUnavailable(
            f"{location}: not a Delta table (no readable {LOG_DIR}/: {e.strerror})"
        ) from None
    versions = [int(m.group(1)) for n in names if (m := _COMMIT.match(n) or _CHECKPOINT.match(n))]
    return max(versions, default=None)


# ---- the format's health hook (factories/delta.py declares it) ------------------------------------------

#: OPTIMIZE's target file size when the table sets none (``delta.targetFileSize``): Delta's
#: ``spark.databricks.delta.optimize.maxFileSize``, 1 GiB.
OPTIMIZE_TARGET_BYTES = 1024 * 1024 * 1024
#: Small files a table needs before OPTIMIZE is worth a run (as Iceberg's ``min-input-files``).
MIN_SMALL_FILES = 5


def table_health(catalog: Any, table: Any) -> Any:
    """The Delta table's health (:class:`metadata.health.FormatHealth`) measured against its own target:
    **small files** when OPTIMIZE would leave fewer files than there are (per partition, ceil(bytes /
    target)), at least :data:`MIN_SMALL_FILES` files are under 75 % of the target, and files were added
    since the last OPTIMIZE (the optimize action's ``min-new-files``, else 1); points = 40 × removable /
    files (at least 5), fixed by ``optimize``. The log's figures (commits, bytes, checkpoint) are shown
    without a finding: Delta checkpoints and cleans its log itself. Raises HealthUnavailable."""
    import math

    from airflow_tablemgmt.metadata.health import Finding, FormatHealth
    from airflow_tablemgmt.metadata.table_paths import table_location

    location = table_location(catalog, table.identifier)
    state = read_delta(location)
    target = int(state.properties.get("delta.targetFileSize") or OPTIMIZE_TARGET_BYTES)
    small_line = int(target * 0.75)
    figures = delta_health(location, small_line, state=state)
    per_partition: dict[str, int] = {}
    for path, size in state.files.items():
        part = path.rpartition("/")[0]
        per_partition[part] = per_partition.get(part, 0) + size
    compacted = sum(max(1, math.ceil(b / target)) for b in per_partition.values())
    removable = max(0, min(figures["small_files"], state.data_files - compacted))
    min_new = 1
    if "optimize" in table.actions:
        min_new = max(1, int(getattr(table.action_settings("optimize"), "min_new_files", 1)))
    figures.update(target_file_size_bytes=target, compacted_data_files=compacted, removable_files=removable)
    findings = []
    if removable >= 1 and figures["small_files"] >= MIN_SMALL_FILES and state.changes.files_added >= min_new:
        findings.append(
            Finding(
                "small_files",
                max(5, round(40 * removable / state.data_files)),
                "optimize",
                f"{state.data_files} data files where {compacted} would hold the data at the "
                f"{target / 1024 / 1024:.0f} MiB target ({figures['small_files']} under "
                f"{small_line / 1024 / 1024:.0f} MiB, {state.changes.files_added} added since the last "
                f"OPTIMIZE): OPTIMIZE would remove {removable}",
            )
        )
    return FormatHealth("delta", figures, tuple(findings))
