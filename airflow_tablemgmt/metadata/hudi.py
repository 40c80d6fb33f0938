"""A Hudi table's timeline from ``.hoodie`` without a JVM: completed and pending instants, the delta commits
since the last compaction (RFC-43's threshold), pending compactions, and the commits since the last clean.

Hudi 1.x keeps the active timeline in ``.hoodie/timeline/`` (a completed instant is
``<instant>_<completion>.<action>``); 0.x kept it in ``.hoodie/`` itself (``<instant>.<action>``). A
requested or inflight instant is ``<instant>.<action>.requested`` / ``.inflight``. On a merge-on-read
table a completed compaction is a ``commit`` whose instant was requested as a ``compaction``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.table_paths import local_path

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
        }

    def _requested_as(self, action: str) -> set[str]:
        return set(self._requested.get(action, ()))

    _requested: dict[str, tuple[str, ...]] = field(default_factory=dict)


_WRITES = ("commit", "deltacommit", "replacecommit")


def read_timeline(location: str) -> HudiTimeline:
    """The Hudi table at ``location`` (a local path or ``file:`` URI). Raises HealthUnavailable."""
    root = local_path(location)
    if root is None:
        raise HealthUnavailable(
            f"{location}: only local Hudi timelines are read without a JVM today; the job reads the table itself"
        )
    hoodie = Path(root) / HOODIE
    table_type = _table_type(hoodie, location)
    timeline = hoodie / "timeline" if (hoodie / "timeline").is_dir() else hoodie
    try:
        names = os.listdir(timeline)
    except OSError as e:
        raise HealthUnavailable(f"{location}: unreadable Hudi timeline ({e.strerror})") from None
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


def _table_type(hoodie: Path, location: str) -> str:
    try:
        text = (hoodie / "hoodie.properties").read_text()
    except OSError as e:
        raise HealthUnavailable(
            f"{location}: not a Hudi table (no readable {HOODIE}/hoodie.properties: {e.strerror})"
        ) from None
    for line in text.splitlines():
        if line.startswith("hoodie.table.type="):
            return line.split("=", 1)[1].strip()
    return "COPY_ON_WRITE"
