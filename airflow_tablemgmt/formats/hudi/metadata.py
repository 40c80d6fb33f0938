"""A Hudi table's timeline from ``.hoodie`` without a JVM: completed and pending instants, the delta commits
since the last compaction (RFC-43's threshold), pending compactions, and the commits since the last clean.

Hudi 1.x keeps the active timeline in ``.hoodie/timeline/`` (a completed instant is
``<instant>_<completion>.<action>``); 0.x kept it in ``.hoodie/`` itself (``<instant>.<action>``). A
requested or inflight instant is ``<instant>.<action>.requested`` / ``.inflight``. On a merge-on-read
table a completed compaction is a ``commit`` whose instant was requested as a ``compaction``.

A table on S3 (``s3a://``, ``s3://``) is read the same way through pyarrow's S3 client with the catalog's
``spark.hadoop.fs.s3a.*`` settings (``metadata/table_dir.py``): the functions take them as ``properties``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.table_dir import PathNotFound, TableDir, open_table_dir

HOODIE = ".hoodie"
_COMPLETED = re.compile(r"^(\d{14,17})(?:_(\d{14,17}))?\.([a-z]+)$")
_PENDING = re.compile(r"^(\d{14,17})\.([a-z]+)\.(requested|inflight)$")
MERGE_ON_READ = "MERGE_ON_READ"


@dataclass(frozen=True)
class HudiTimeline:
    """The active timeline, instants as strings (Hudi's ``yyyyMMddHHmmss[SSS]``)."""

    location: str
    table_type: str
    completed: list[tuple[str, str]] = field(default_factory=list)  # (instant, action), oldest first
    pending: list[tuple[str, str, str]] = field(default_factory=list)  # (instant, action, state)

    @property
    def merge_on_read(self) -> bool:
        return self.table_type == MERGE_ON_READ

    @property
    def latest_instant(self) -> str | None:
        return self.completed[-1][0] if self.completed else None

    def pending_compactions(self) -> list[str]:
        """Compaction instants scheduled (requested or inflight) and not completed, oldest first."""
        return sorted({i for i, action, _ in self.pending if action == "compaction"})

    def pending_clusterings(self) -> list[str]:
        """Clustering instants scheduled (requested or inflight) and not completed, oldest first: one that
        failed stays so until a clustering executes or rolls it back (Hudi 1.x names them ``clustering``)."""
        return sorted({i for i, action, _ in self.pending if action == "clustering"})

    def completed_compactions(self) -> list[str]:
        requested = self._requested_as("compaction")
        return [i for i, action in self.completed if action == "commit" and i in requested]

    def delta_commits_since_compaction(self) -> int:
        last = (self.completed_compactions() or [""])[-1]
        return sum(1 for i, action in self.completed if action == "deltacommit" and i > last)

    def commits_since_clean(self) -> int:
        last = max((i for i, action in self.completed if action == "clean"), default="")
        return sum(1 for i, action in self.completed if action in _WRITES and i > last)

    def commits_since_clustering(self) -> int:
        last = max((i for i, action in self.completed if action == "replacecommit"), default="")
        return sum(1 for i, action in self.completed if action in ("commit", "deltacommit") and i > last)

    def active_commits(self) -> int:
        """Completed commits on the active timeline (what Hudi's archiver compares with max-commits)."""
        return sum(1 for _, action in self.completed if action in _WRITES)

    def maintenance_instants(self) -> set[str]:
        """Completed instants this service's table services wrote: compactions (a ``commit`` requested as
        a ``compaction``) and clusterings (a ``replacecommit`` requested as a ``clustering`` in 1.x)."""
        ours = self._requested_as("compaction") | self._requested_as("clustering")
        return {i for i, action in self.completed if action in _WRITES and i in ours}

    def ancestry(self, depth: int) -> list[tuple[int, bool]]:
        """The newest ``depth`` completed commits, newest first: (instant, whether a writer changed data
        in it) -- False for compaction and clustering, which rewrite files and keep the rows."""
        ours = self.maintenance_instants()
        commits = [i for i, action in self.completed if action in _WRITES]
        return [(int(i), i not in ours) for i in reversed(commits[-depth:])]

    def count(self, action: str) -> int:
        return sum(1 for _, a in self.completed if a == action)

    def summary(self) -> dict[str, Any]:
        """Figures for a process summary (``current_snapshot_id`` is the latest completed instant)."""
        latest = self.latest_instant
        return {
            "current_snapshot_id": int(latest) if latest else None,
            "table_type": self.table_type,
            "delta_commits_since_compaction": self.delta_commits_since_compaction(),
            "pending_compactions": self.pending_compactions(),
            "commits_since_clean": self.commits_since_clean(),
            "completed_instants": len(self.completed),
            "active_commits": self.active_commits(),
        }

    def _requested_as(self, action: str) -> set[str]:
        return set(self._requested.get(action, ()))

    _requested: dict[str, tuple[str, ...]] = field(default_factory=dict)


_WRITES = ("commit", "deltacommit", "replacecommit")


def _timeline_names(table: TableDir) -> list[str]:
    """The names in the timeline directory: ``.hoodie/timeline/`` (1.x) when there is one, else ``.hoodie/``."""
    try:
        entries = table.list(HOODIE)
        if any(e.is_dir and e.name == "timeline" for e in entries):
            entries = table.list(f"{HOODIE}/timeline")
    except PathNotFound:
        raise HealthUnavailable(f"{table.location}: not a Hudi table (no {HOODIE}/ there)") from None
    return [e.name for e in entries if not e.is_dir]


def timeline_listing(location: str, properties: Mapping[str, str] | None = None) -> frozenset[str]:
    """The names in the timeline directory: what a watcher compares before reading the timeline again."""
    return frozenset(_timeline_names(open_table_dir(location, properties, "Hudi timeline")))


def read_timeline(location: str, properties: Mapping[str, str] | None = None) -> HudiTimeline:
    """The Hudi table at ``location``: a local path, ``file:`` URI, or ``s3a://``/``s3://`` URI read with
    ``properties`` (the catalog's ``spark.hadoop.fs.s3a.*``, secrets resolved). Raises HealthUnavailable
    (StoreUnreachable when the store cannot be read)."""
    table = open_table_dir(location, properties, "Hudi timeline")
    table_type = _table_type(table)
    names = _timeline_names(table)
    completed: list[tuple[str, str]] = []
    states: dict[tuple[str, str], str] = {}
    requested: dict[str, list[str]] = {}
    for name in names:
        if m := _PENDING.match(name):
            instant, action, state = m.groups()
            if state == "requested":
                requested.setdefault(action, []).append(instant)
            if states.get((instant, action)) != "inflight":
                states[(instant, action)] = state
        elif m := _COMPLETED.match(name):
            completed.append((m.group(1), m.group(3)))
    done = {i for i, _ in completed}
    pending = sorted((i, a, s) for (i, a), s in states.items() if i not in done)
    return HudiTimeline(
        location,
        table_type,
        sorted(completed),
        pending,
        {a: tuple(sorted(v)) for a, v in requested.items()},
    )


_LOG_FILE = re.compile(r"^\.(.+)_(\d{14,17})\.log\.\d+(?:_[\d-]+)?$")
_BASE_FILE = re.compile(r"^(.+?)_[\d-]+_(\d{14,17})\.(?:parquet|orc|hfile)$")


@dataclass(frozen=True)
class HudiFiles:
    """The table's data files on disk by file group: base files and log files (every slice still kept)."""

    base_files: dict[str, int] = field(default_factory=dict)  # file group id -> base files
    log_files: dict[str, int] = field(default_factory=dict)  # file group id -> log files

    @property
    def file_groups(self) -> int:
        return len(set(self.base_files) | set(self.log_files))

    def summary(self) -> dict[str, Any]:
        logs = list(self.log_files.values())
        return {
            "file_groups": self.file_groups,
            "base_files": sum(self.base_files.values()),
            "log_files": sum(logs),
            "max_log_files_per_file_group": max(logs, default=0),
            "file_groups_with_logs": sum(1 for n in logs if n),
        }


def list_files(location: str, properties: Mapping[str, str] | None = None) -> HudiFiles:
    """Base and log files per file group, listed from the table directory (``.hoodie`` skipped), local
    or on S3 (``properties`` as for :func:`read_timeline`). Raises HealthUnavailable."""
    base: dict[str, int] = {}
    logs: dict[str, int] = {}
    for name in open_table_dir(location, properties, "Hudi table").walk(HOODIE):
        if m := _LOG_FILE.match(name):
            logs[m.group(1)] = logs.get(m.group(1), 0) + 1
        elif m := _BASE_FILE.match(name):
            base[m.group(1)] = base.get(m.group(1), 0) + 1
    return HudiFiles(base, logs)


def hudi_health(location: str, properties: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The table's health figures without a JVM: the timeline's (pending compactions, delta commits since
    the last compaction, commits since the last clean, active commits) and the files' (log files per
    file group). Raises HealthUnavailable."""
    timeline = read_timeline(location, properties)
    return {
        "format": "hudi",
        "table_type": timeline.table_type,
        "latest_instant": timeline.latest_instant,
        "pending_compactions": len(timeline.pending_compactions()),
        "pending_clusterings": len(timeline.pending_clusterings()),
        "delta_commits_since_compaction": timeline.delta_commits_since_compaction(),
        "commits_since_clean": timeline.commits_since_clean(),
        "active_commits": timeline.active_commits(),
        **list_files(location, properties).summary(),
    }


def hoodie_properties(table: TableDir) -> dict[str, str]:
    """``.hoodie/hoodie.properties`` as a dict (Java properties: ``\\:`` and ``\\=`` unescaped)."""
    try:
        text = table.read_text(f"{HOODIE}/hoodie.properties")
    except PathNotFound:
        raise HealthUnavailable(
            f"{table.location}: not a Hudi table (no {HOODIE}/hoodie.properties there)"
        ) from None
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "!")):
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = re.sub(r"\\(.)", r"\1", value.strip())
    return out


def _table_type(table: TableDir) -> str:
    return hoodie_properties(table).get("hoodie.table.type", "COPY_ON_WRITE").strip()


# ---- the format's health hook (factories/hudi.py declares it) -------------------------------------------


def table_health(catalog: Any, table: Any) -> Any:
    """The Hudi table's health (:class:`metadata.health.FormatHealth`) from its timeline and files, measured
    against the table's own action settings (their defaults when an action is not declared):

    * **pending compaction** (merge-on-read): a compaction scheduled and not executed; 20 points, fixed
      by ``compaction``;
    * **log files**: merge-on-read file groups with log files and at least ``min-delta-commits`` delta
      commits since the last compaction; points = 30 × min(1, log files per group at most / (2 ×
      min-delta-commits)) (at least 5), fixed by ``compaction``;
    * **uncleaned commits**: more commits since the last clean than ``retain-commits`` keeps; points = 20 ×
      min(1, excess / (2 × retain-commits)) (at least 5), fixed by ``clean``;
    * **pending clustering**: a clustering scheduled and not completed (one that failed leaves its plan
      pending); 15 points, fixed by ``clustering``;
    * **active timeline**: more completed instants on the active timeline than ``max-commits``; 10
      points, fixed by ``archive``.

    Raises HealthUnavailable."""
    from airflow_tablemgmt.metadata.health import Finding, FormatHealth
    from airflow_tablemgmt.metadata.table_paths import table_location

    def option(action: str, name: str, default: int) -> int:
        return (
            int(getattr(table.action_settings(action), name, default)) if action in table.actions else default
        )

    try:
        figures = hudi_health(table_location(catalog, table.identifier), catalog.properties)
    except HealthUnavailable as e:
        raise type(e)(f"{table.id}: {e}") from None
    mor = figures["table_type"] == MERGE_ON_READ
    min_delta = option("compaction", "min_delta_commits", 5)
    retain = option("clean", "retain_commits", 10)
    max_commits = option("archive", "max_commits", 30)
    figures.update(min_delta_commits=min_delta, retain_commits=retain, max_commits=max_commits)
    findings = []
    if mor and figures["pending_compactions"]:
        findings.append(
            Finding(
                "pending_compaction",
                20,
                "compaction",
                f"{figures['pending_compactions']} compaction(s) scheduled and not executed",
            )
        )
    if figures["pending_clusterings"]:  # e.g. a clustering that failed: the table is not as it claimed
        findings.append(
            Finding(
                "pending_clustering",
                15,
                "clustering",
                f"{figures['pending_clusterings']} clustering(s) scheduled and not completed (failed or "
                "running); the next clustering executes or rolls back the plan",
            )
        )
    deltas, most = figures["delta_commits_since_compaction"], figures["max_log_files_per_file_group"]
    if mor and figures["log_files"] and deltas >= min_delta:
        findings.append(
            Finding(
                "log_files",
                max(5, round(30 * min(1.0, most / (2 * min_delta)))),
                "compaction",
                f"{figures['log_files']} log files in {figures['file_groups_with_logs']} of "
                f"{figures['file_groups']} file groups (up to {most} per group) after {deltas} delta commits "
                f"since the last compaction (min-delta-commits {min_delta})",
            )
        )
    since_clean = figures["commits_since_clean"]
    if since_clean > retain:
        findings.append(
            Finding(
                "uncleaned_commits",
                max(5, round(20 * min(1.0, (since_clean - retain) / (2 * retain)))),
                "clean",
                f"{since_clean} commits since the last clean, which keeps {retain} (retain-commits)",
            )
        )
    if figures["active_commits"] > max_commits:
        findings.append(
            Finding(
                "active_timeline",
                10,
                "archive",
                f"{figures['active_commits']} instants on the active timeline (max-commits {max_commits})",
            )
        )
    return FormatHealth("hudi", figures, tuple(findings))
