"""The health score of a table, 0–100: the one definition the REST API, the page, the CLI and the
metrics share. It is computed from :class:`~airflow_tablemgmt.metadata.files.FileStats` alone, which
were measured against the table's own targets (``metadata/files.py``).

A table starts at 100 and loses points for each thing a maintenance action would fix. Each *finding*
names the action that fixes it; a table is **red** (``needs_attention``) exactly when it has a finding,
i.e. when running an action would help. Nothing else turns it red: a small table in one small file is
healthy, and so is a table whose every partition already holds as few files as its size needs.

=================  =======  ===================================================  =======================
finding            points   when                                                  action that fixes it
=================  =======  ===================================================  =======================
small files        ≤ 40     a compaction to the target file size would remove     rewrite-files
                            files (``excess_data_files`` ≥ 1) and the table has
                            at least ``min-input-files`` small files; points =
                            40 × excess / data files (at least 5)
delete files       ≤ 25     delete files exist and they delete ≥ 10 % of the      rewrite-deletes
                            rows or number ≥ 5; points = 25 × min(1, ratio / 0.5)
                            (at least 5)
snapshots          ≤ 20     snapshots an expiry would drop exist and the oldest   expire-snapshots
                            is more than twice the action's ``older-than`` old;
                            points = 20 × min(1, expirable / 100) (at least 5)
manifests          ≤ 15     ≥ 10 manifests and more than twice as many as their   rewrite-manifests
                            bytes need at 8 MiB each; points = 15 × min(1,
                            (manifests − needed) / (4 × needed)) (at least 3)
=================  =======  ===================================================  =======================

A format may measure its tables itself: its descriptor names a health hook (``Format.health``) returning a
:class:`FormatHealth`, the format's figures and findings, scored the same way (100 minus the findings'
points). Nothing here names a format.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
    from airflow_tablemgmt.metadata.files import FileStats

#: Iceberg's default target manifest size (``commit.manifest.target-size-bytes``).
MANIFEST_TARGET_BYTES = 8 * 1024 * 1024
DELETE_RATIO_FLAG = 0.10
DELETE_FILES_FLAG = 5
MANIFESTS_FLAG = 10


@dataclass(frozen=True)
class Finding:
    """One thing an action would fix: its kind, the points it costs, the action and why, in words."""

    kind: str  # small_files | delete_files | snapshots | manifests, or a format's own (its health hook)
    points: int
    action: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "points": self.points, "action": self.action, "reason": self.reason}


@dataclass(frozen=True)
class HealthScore:
    score: int
    findings: tuple[Finding, ...]

    @property
    def needs_attention(self) -> bool:
        return bool(self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "needs_attention": self.needs_attention,
            "findings": [f.to_dict() for f in self.findings],
        }


def _mib(n: float) -> str:
    return f"{n / 1024 / 1024:.1f} MiB"


def _small_files(s: FileStats) -> Finding | None:
    excess = s.excess_data_files
    if excess < 1 or s.small_data_files < s.min_input_files or not s.data_files:
        return None
    points = max(5, round(40 * excess / s.data_files))
    return Finding(
        "small_files",
        points,
        "rewrite-files",
        f"{s.data_files} data files where {s.compacted_data_files} would hold the data at the "
        f"{_mib(s.target_file_size_bytes)} target ({s.small_data_files} under "
        f"{_mib(s.small_file_threshold_bytes)}): compaction would remove {excess}",
    )


def _delete_files(s: FileStats) -> Finding | None:
    ratio = s.deleted_row_ratio
    if not s.delete_files or (ratio < DELETE_RATIO_FLAG and s.delete_files < DELETE_FILES_FLAG):
        return None
    points = max(5, round(25 * min(1.0, ratio / 0.5)))
    return Finding(
        "delete_files",
        points,
        "rewrite-deletes",
        f"{s.delete_files} delete files mark {s.deleted_rows} of {s.records} rows deleted ({ratio:.0%})",
    )


def _snapshots(s: FileStats) -> Finding | None:
    if not s.expirable_snapshots or (s.oldest_snapshot_age_s or 0) <= 2 * s.snapshot_max_age_s:
        return None
    points = max(5, round(20 * min(1.0, s.expirable_snapshots / 100)))
    days = (s.oldest_snapshot_age_s or 0) / 86400
    return Finding(
        "snapshots",
        points,
        "expire-snapshots",
        f"{s.expirable_snapshots} of {s.snapshots} snapshots are older than "
        f"{s.snapshot_max_age_s / 86400:g} d (the oldest {days:.1f} d)",
    )


def _manifests(s: FileStats) -> Finding | None:
    needed = max(1, math.ceil(s.manifest_bytes / MANIFEST_TARGET_BYTES))
    if s.manifests < MANIFESTS_FLAG or s.manifests <= 2 * needed:
        return None
    points = max(3, round(15 * min(1.0, (s.manifests - needed) / (4 * needed))))
    return Finding(
        "manifests",
        points,
        "rewrite-manifests",
        f"{s.manifests} manifests ({_mib(s.manifest_bytes)}) where {needed} would do",
    )


def score(stats: FileStats) -> HealthScore:
    """The table's score and findings (the table in this module's docstring)."""
    findings = tuple(f for f in (check(stats) for check in _CHECKS) if f is not None)
    return HealthScore(max(0, 100 - sum(f.points for f in findings)), findings)


_CHECKS = (_small_files, _delete_files, _snapshots, _manifests)


# ---- a format's own health (its hook) ---------------------------------------------------------------


@dataclass(frozen=True)
class FormatHealth:
    """What a format's health hook reports for one table, read from the format's metadata without a JVM:
    its figures (JSON-ready, the format's own names) and its findings, each naming the action that would
    help. The score is computed as for the built-in figures: 100 minus the findings' points."""

    format: str
    figures: dict[str, Any] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()

    @property
    def score(self) -> HealthScore:
        return HealthScore(max(0, 100 - sum(f.points for f in self.findings)), tuple(self.findings))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "figures": dict(self.figures),
            "findings": [f.to_dict() for f in self.findings],
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> FormatHealth:
        findings = tuple(
            Finding(f["kind"], int(f["points"]), f["action"], f["reason"]) for f in doc["findings"]
        )
        return cls(str(doc["format"]), dict(doc.get("figures") or {}), findings)


#: A format's health hook: (the table's catalog, secret references resolved; the table) -> its health.
#: Raises ``metadata.errors.HealthUnavailable`` when the table cannot be read here.
HealthHook = Callable[["CatalogSpec", "TableSpec"], FormatHealth]
