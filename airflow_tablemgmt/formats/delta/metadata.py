"""A Delta table's state from its ``_delta_log`` without a JVM: the live files, the version, and what was
written since the last ``OPTIMIZE``.

The log is the newest checkpoint (``<v>.checkpoint.parquet``, or its parts, read with pyarrow) plus the
JSON commits after it; ``_last_checkpoint`` names the checkpoint when present, else the directory is
listed. Commits older than the checkpoint are read only to find the last ``OPTIMIZE``, as far back as
the log still holds them (``changes since`` then counts from the oldest commit kept). A table on S3 is
read the same way through pyarrow's S3 client with the catalog's ``spark.hadoop.fs.s3a.*`` settings
(``metadata/table_dir.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.table_dir import PathNotFound, TableDir, open_table_dir

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


def read_delta(
    location: str, properties: Mapping[str, str] | None = None, *, version: int | None = None
) -> DeltaState:
    """The Delta table at ``location``: a local path, ``file:`` URI, or ``s3a://``/``s3://`` URI read with
    ``properties`` (the catalog's ``spark.hadoop.fs.s3a.*``, secrets resolved; ``metadata/table_dir.py``).
    ``version``: the table as of that version (its commits must still be in the log), else the newest.
    Raises HealthUnavailable (StoreUnreachable when the store cannot be read)."""
    table = open_table_dir(location, properties, "Delta log")
    names = _log_names(table)
    commits = sorted(int(m.group(1)) for n in names if (m := _COMMIT.match(n)))
    checkpoints = _checkpoint_parts(list(names))
    if version is not None:
        commits = [c for c in commits if c <= version]
        checkpoints = {v: p for v, p in checkpoints.items() if v <= version}
        names = {n: size for n, size in names.items() if n != "_last_checkpoint"}
    checkpoint = _last_checkpoint(table, names, checkpoints)
    if version is not None and checkpoint is None and (not commits or commits[0] != 0):
        raise HealthUnavailable(f"{location}: version {version} is no longer readable from {LOG_DIR}/")
    if not commits and checkpoint is None:
        raise HealthUnavailable(f"{location}: {LOG_DIR}/ holds no commit")
    files: dict[str, int] = {}
    properties_: dict[str, str] = {}
    partitions: tuple[str, ...] = ()
    start = 0
    if checkpoint is not None:
        files, properties_, partitions = _read_checkpoint(table, checkpoints[checkpoint])
        start = checkpoint + 1
    version = checkpoint if checkpoint is not None else -1
    read: dict[int, list[dict[str, Any]]] = {}  # each commit is read once (one GET on S3)
    for v in (c for c in commits if c >= start):
        for action in _actions(table, v, read):
            if "add" in action:
                files[action["add"]["path"]] = int(action["add"].get("size") or 0)
            elif "remove" in action:
                files.pop(action["remove"]["path"], None)
            elif "metaData" in action:
                properties_ = dict(action["metaData"].get("configuration") or {})
                partitions = tuple(action["metaData"].get("partitionColumns") or ())
        version = v
    return DeltaState(location, version, files, _changes(table, commits, read), properties_, partitions)


def _log_names(table: TableDir) -> dict[str, int]:
    """The log's file names and sizes."""
    try:
        return {e.name: e.size for e in table.list(LOG_DIR) if not e.is_dir}
    except PathNotFound:
        raise HealthUnavailable(f"{table.location}: not a Delta table (no {LOG_DIR}/ there)") from None


def _checkpoint_parts(names: list[str]) -> dict[int, list[str]]:
    parts: dict[int, list[str]] = {}
    for n in names:
        if m := _CHECKPOINT.match(n):
            parts.setdefault(int(m.group(1)), []).append(n)
    return parts


def _last_checkpoint(
    table: TableDir, names: Mapping[str, int], checkpoints: dict[int, list[str]]
) -> int | None:
    if "_last_checkpoint" in names:
        try:
            version = int(json.loads(table.read_text(f"{LOG_DIR}/_last_checkpoint"))["version"])
            if version in checkpoints:
                return version
        except PathNotFound:
            pass
        except (ValueError, KeyError, TypeError):
            pass
    return max(checkpoints) if checkpoints else None


def _read_checkpoint(
    table_dir: TableDir, parts: list[str]
) -> tuple[dict[str, int], dict[str, str], tuple[str, ...]]:
    files: dict[str, int] = {}
    properties: dict[str, str] = {}
    partitions: tuple[str, ...] = ()
    for part in sorted(parts):
        table = table_dir.read_parquet(f"{LOG_DIR}/{part}")
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


def _actions(
    table: TableDir, version: int, read: dict[int, list[dict[str, Any]]] | None = None
) -> list[dict[str, Any]]:
    if read is not None and version in read:
        return read[version]
    rel = f"{LOG_DIR}/{version:020d}.json"
    text = table.read_text(rel)
    try:
        actions = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as e:
        raise HealthUnavailable(f"{table.location}/{rel}: unreadable Delta commit: {e}") from None
    if read is not None:
        read[version] = actions
    return actions


def commit_actions(
    location: str, version: int, properties: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The actions of one commit (``add``, ``remove``, ``commitInfo`` ...), as logged."""
    return _actions(open_table_dir(location, properties, "Delta log"), version)


def _changes(table: TableDir, commits: list[int], read: dict[int, list[dict[str, Any]]]) -> DeltaChanges:
    """Walk the kept commits newest first, counting data changes until the last OPTIMIZE."""
    count = added = removed = 0
    for v in reversed(commits):
        actions = _actions(table, v, read)
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
    location: str,
    small_file_bytes: int = SMALL_FILE_BYTES,
    *,
    state: DeltaState | None = None,
    properties: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The table's health figures from its log, without a JVM: live files, small files, the log's size
    (JSON commits kept and their bytes, the newest checkpoint) and what was written since the last
    OPTIMIZE. ``state``: the table already read; ``properties``: as for :func:`read_delta`. Raises
    HealthUnavailable."""
    state = state if state is not None else read_delta(location, properties)
    names = _log_names(open_table_dir(location, properties, "Delta log"))
    commits = checkpoint_bytes = commit_bytes = 0
    checkpoint: int | None = None
    for name, size in names.items():
        if _COMMIT.match(name):
            commits += 1
            commit_bytes += size
        elif m := _CHECKPOINT.match(name):
            checkpoint = max(checkpoint or 0, int(m.group(1)))
            checkpoint_bytes += size
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


def ancestry(
    location: str, depth: int, properties: Mapping[str, str] | None = None
) -> list[tuple[int, bool]]:
    """The newest ``depth`` commits still in the log, newest first: (version, whether it changed data),
    i.e. added or removed a file with ``dataChange`` true (OPTIMIZE and VACUUM do not)."""
    table = open_table_dir(location, properties, "Delta log")
    versions = sorted((int(m.group(1)) for n in _log_names(table) if (m := _COMMIT.match(n))), reverse=True)
    out: list[tuple[int, bool]] = []
    for v in versions[:depth]:
        actions = _actions(table, v)
        changed = any(
            (kind in a and a[kind].get("dataChange", True)) for a in actions for kind in ("add", "remove")
        )
        out.append((v, changed))
    return out


def latest_version(location: str, properties: Mapping[str, str] | None = None) -> int | None:
    """The newest commit's version from the log's listing alone (no commit read): the cheap poll."""
    names = _log_names(open_table_dir(location, properties, "Delta log"))
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
    target)), at least ``min-small-files`` files are under 75 % of the target (the optimize action's
    threshold, :data:`MIN_SMALL_FILES` by default), and files were added since the last OPTIMIZE (the
    optimize action's ``min-new-files``, else 1); points = 60 × removable / files × min(1, removable / 50),
    at least 1 (as the built-in small-files finding: no cliff at the threshold), fixed by ``optimize``; the
    gate runs a bin-pack OPTIMIZE exactly then. The log's figures (commits, bytes, checkpoint) are shown
    without a finding: Delta checkpoints and cleans its log itself. Raises HealthUnavailable."""
    import math

    from airflow_tablemgmt.metadata.health import Finding, FormatHealth
    from airflow_tablemgmt.metadata.table_paths import table_location

    location = table_location(catalog, table.identifier)
    try:
        state = read_delta(location, catalog.properties)
        target = int(state.properties.get("delta.targetFileSize") or OPTIMIZE_TARGET_BYTES)
        small_line = int(target * 0.75)
        figures = delta_health(location, small_line, state=state, properties=catalog.properties)
    except HealthUnavailable as e:
        raise type(e)(f"{table.id}: {e}") from None
    per_partition: dict[str, int] = {}
    for path, size in state.files.items():
        part = path.rpartition("/")[0]
        per_partition[part] = per_partition.get(part, 0) + size
    compacted = sum(max(1, math.ceil(b / target)) for b in per_partition.values())
    removable = max(0, min(figures["small_files"], state.data_files - compacted))
    min_new, min_small = 1, MIN_SMALL_FILES
    if "optimize" in table.actions:
        settings = table.action_settings("optimize")
        min_new = max(1, int(getattr(settings, "min_new_files", 1)))
        min_small = int(settings.thresholds.get("min-small-files", MIN_SMALL_FILES))
    figures.update(
        target_file_size_bytes=target,
        compacted_data_files=compacted,
        removable_files=removable,
        thresholds={"min-small-files": min_small, "min-new-files": min_new},
    )
    findings = []
    if removable >= 1 and figures["small_files"] >= min_small and state.changes.files_added >= min_new:
        findings.append(
            Finding(
                "small_files",
                max(1, round(60 * removable / state.data_files * min(1.0, removable / 50))),
                "optimize",
                f"{state.data_files} data files where {compacted} would hold the data at the "
                f"{target / 1024 / 1024:.0f} MiB target ({figures['small_files']} under "
                f"{small_line / 1024 / 1024:.0f} MiB, {state.changes.files_added} added since the last "
                f"OPTIMIZE): OPTIMIZE would remove {removable}",
            )
        )
    return FormatHealth("delta", figures, tuple(findings))
