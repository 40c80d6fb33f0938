"""The health score of a table, 0–100, and the gate's decision whether an action pays: one computation the
REST API, the page, the CLI, the metrics and the gate before any Spark job (``formats/base.py``) share. It
is computed from :class:`~airflow_tablemgmt.metadata.files.FileStats` alone, measured against the table's
own targets and thresholds (``metadata/files.py``, ``core/thresholds.py``).

(Just over 400 lines on purpose: the score and the gate's decision are one computation on the same
figures, which is what keeps them from disagreeing; the next split is the findings' table of points into a
module of its own.)

A table starts at 100 and loses points for each *finding*. A finding of an action exists exactly when the
action's thresholds say a run pays (:func:`decide`: the gate runs the action then, and skips it else), so
a table is **red** (``needs_attention``) when running an action would help, or when it is over-partitioned
(no maintenance action merges files across partitions: the partition spec is what would help). A small
table in one small file is healthy, and so is a table whose every partition holds as few files as its
size needs.

Points grow with what a run would fix, from a few at the threshold (no cliff where a finding appears) to
the cap, which alone takes a table below the default alert threshold of 50:

=================  =======  ===================================================  =======================
finding            points   when (the action's thresholds, core/thresholds.py)    what helps
=================  =======  ===================================================  =======================
small files        ≤ 60     a compaction to the target size would remove files   rewrite-files
                            (per partition: ceil(bytes / target) files are
                            enough, in the partitions Iceberg rewrites: ≥
                            ``min-input-files`` files or more than a target
                            file of bytes) and the table holds ≥ ``min-small-files``
                            small files; 60 × removable / data files × min(1,
                            removable / 50), at least 1
over-partitioned   ≤ 50     ≥ 100 partitions, ≥ 10 × as many as the data needs   repartition (a coarser
                            at the target size, and no compaction would remove   partition spec)
                            a file; 10 + 40 × min(1, log10(partitions /
                            (10 × needed)) / 2)
delete files       ≤ 60     delete files mark ≥ ``min-deleted-row-ratio`` of     rewrite-deletes
                            the rows deleted, or number ≥ ``min-delete-files``;  (rewrite-files when
                            60 × max(min(1, ratio / 0.5), min(1, files / 100)),  all are v3 deletion
                            at least 3 (v3 deletion vectors count with them;     vectors)
                            all vectors: by their rows only)
snapshots          ≤ 60     ≥ ``min-expirable-snapshots`` snapshots older than   expire-snapshots
                            ``older-than`` beyond ``retain-last``; 60 × min(1,
                            log10(1 + expirable) / 4), at least 3 (≈ 5,800
                            expirable: 56)
manifests          ≤ 30     ≥ ``min-manifests`` manifests and more than          rewrite-manifests
                            ``manifests-per-needed`` × what their bytes need at
                            8 MiB each; 30 × min(1, excess / 100), at least 1
=================  =======  ===================================================  =======================

A format may measure its tables itself: its descriptor names a health hook (``Format.health``) returning a
:class:`FormatHealth`, the format's figures and findings, scored the same way (100 minus the findings'
points); the gate runs an action of it when one of its findings names the action. Nothing here names a
format.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.thresholds import FILE_FIGURE_ACTIONS

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
    from airflow_tablemgmt.metadata.files import FileStats

#: Iceberg's default target manifest size (``commit.manifest.target-size-bytes``).
MANIFEST_TARGET_BYTES = 8 * 1024 * 1024
#: Over-partitioned: at least this many partitions, and this many times as many as the data needs.
OVER_PARTITIONED_MIN = 100
OVER_PARTITIONED_FACTOR = 10
#: The finding of an over-partitioned table names this instead of a maintenance action.
REPARTITION = "repartition"


@dataclass(frozen=True)
class Finding:
    """One thing an action would fix: its kind, the points it costs, the action and why, in words."""

    kind: str  # small_files | over_partitioned | delete_files | snapshots | manifests, or a format's own
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


@dataclass(frozen=True)
class Check:
    """One action's check on the figures: whether a run pays, the figures and thresholds it was decided on,
    and why, in words (what a run would fix, or why it would not pay). ``finding``: the score's, when it pays."""

    action: str
    pays: bool
    figures: dict[str, Any]
    reason: str
    finding: Finding | None = None


def _mib(n: float) -> str:
    return f"{n / 1024 / 1024:.1f} MiB"


def _age(seconds: float) -> str:
    """``older-than`` as it is written (5d, 1s)."""
    from datetime import timedelta

    from airflow_tablemgmt.core.durations import format_duration

    return format_duration(timedelta(seconds=round(seconds)))


def thresholds_of(s: FileStats, action: str) -> dict[str, float]:
    """The thresholds ``s`` was measured with for ``action`` (``FileStats.thresholds``), else the defaults
    (a rewrite's ``min-*`` from the figures' ``min_input_files``)."""
    measured = (s.thresholds or {}).get(action)
    spec = FILE_FIGURE_ACTIONS[action]
    if measured:
        return {**spec.effective({}), **measured}
    return spec.effective({}, _Defaults(s.min_input_files))


@dataclass(frozen=True)
class _Defaults:
    min_input_files: int


def removable(s: FileStats) -> int:
    """Small files a compaction would remove: per partition as Iceberg plans it when the figures have it
    (``removable_data_files``), else beyond what the data's size needs in each partition."""
    return s.excess_data_files if s.removable_data_files is None else s.removable_data_files


def _small_files(s: FileStats) -> Check:
    th = thresholds_of(s, "rewrite-files")
    excess, small, minimum = removable(s), s.small_data_files, int(th["min-small-files"])
    figures = {
        "data_files": s.data_files,
        "small_data_files": small,
        "removable_data_files": excess,
        "compacted_data_files": s.compacted_data_files,
        "partitions": s.partitions,
        "target_file_size_bytes": s.target_file_size_bytes,
        "small_file_threshold_bytes": s.small_file_threshold_bytes,
        "thresholds": th,
    }
    if excess < 1 or small < minimum or not s.data_files:
        why = (
            f"a compaction would remove no file ({s.data_files} data files in {s.partitions} partitions: "
            f"each holds as few as its bytes need at the {_mib(s.target_file_size_bytes)} target, or fewer "
            f"than min-input-files {s.min_input_files} and less than one target file)"
            if excess < 1
            else f"{small} small files (under {_mib(s.small_file_threshold_bytes)}), fewer than "
            f"min-small-files {minimum}"
        )
        return Check("rewrite-files", False, figures, why)
    points = max(1, round(60 * excess / s.data_files * min(1.0, excess / 50)))
    reason = (
        f"{s.data_files} data files where {s.compacted_data_files} would hold the data at the "
        f"{_mib(s.target_file_size_bytes)} target ({small} under "
        f"{_mib(s.small_file_threshold_bytes)}): compaction would remove {excess}"
    )
    return Check(
        "rewrite-files", True, figures, reason, Finding("small_files", points, "rewrite-files", reason)
    )


def _over_partitioned(s: FileStats) -> Finding | None:
    needed = max(1, math.ceil(s.data_bytes / max(1, s.target_file_size_bytes)))
    if (
        s.partitions < OVER_PARTITIONED_MIN
        or s.partitions < OVER_PARTITIONED_FACTOR * needed
        or removable(s) >= 1
    ):
        return None
    ratio = s.partitions / (OVER_PARTITIONED_FACTOR * needed)
    points = round(10 + 40 * min(1.0, math.log10(max(ratio, 1.0)) / 2))
    return Finding(
        "over_partitioned",
        points,
        REPARTITION,
        f"{s.data_files} data files ({_mib(s.data_bytes)}) in {s.partitions} partitions where {needed} "
        f"file(s) at the {_mib(s.target_file_size_bytes)} target would hold the data: no compaction merges "
        "files across partitions; a coarser partition spec would",
    )


def _delete_files(s: FileStats) -> Check:
    th = thresholds_of(s, "rewrite-deletes")
    ratio, files = s.deleted_row_ratio, s.delete_files
    # v3 deletion vectors count with the delete files, their kinds apart (metadata/deletes.py). A table whose
    # deletes are all vectors gives rewrite-deletes nothing to convert (Iceberg 1.10 returns at once), and
    # one vector per data file costs nothing by its number: its deleted rows do, which rewrite-files applies
    # (delete-ratio-threshold), so the finding names rewrite-files and rewrite-deletes does not pay.
    vectors_only = files > 0 and s.deletion_vectors == files
    figures = {
        "delete_files": files,
        "position_delete_files": s.position_delete_files,
        "equality_delete_files": s.equality_delete_files,
        "deletion_vectors": s.deletion_vectors,
        "deleted_rows": s.deleted_rows,
        "dv_deleted_rows": s.dv_deleted_rows,
        "records": s.records,
        "deleted_row_ratio": ratio,
        "thresholds": th,
    }
    words = s.deletes_in_words
    many = files - s.deletion_vectors >= th["min-delete-files"]  # vectors never count by their number
    if not files or (ratio < th["min-deleted-row-ratio"] and not many):
        rule = (
            "vectors count by their rows"
            if vectors_only
            else f"fewer than min-delete-files {th['min-delete-files']:g}"
        )
        why = (
            "no delete files"
            if not files
            else f"{words} ({rule}) mark {ratio:.1%} of the rows deleted (under min-deleted-row-ratio "
            f"{th['min-deleted-row-ratio']:g})"
        )
        return Check("rewrite-deletes", False, figures, why)
    points = max(3, round(60 * max(min(1.0, ratio / 0.5), min(1.0, (files - s.deletion_vectors) / 100))))
    reason = f"{words} mark {s.deleted_rows} of {s.records} rows deleted ({ratio:.0%})"
    if vectors_only:
        why = f"{reason}: all deletion vectors, nothing for rewrite-deletes to convert (rewrite-files applies them)"
        return Check(
            "rewrite-deletes", False, figures, why, Finding("delete_files", points, "rewrite-files", reason)
        )
    return Check(
        "rewrite-deletes", True, figures, reason, Finding("delete_files", points, "rewrite-deletes", reason)
    )


def _snapshots(s: FileStats) -> Check:
    th = thresholds_of(s, "expire-snapshots")
    expirable = s.expirable_snapshots
    days = (s.oldest_snapshot_age_s or 0) / 86400
    figures = {
        "snapshots": s.snapshots,
        "expirable_snapshots": expirable,
        "oldest_snapshot_age_s": s.oldest_snapshot_age_s,
        "older_than_s": s.snapshot_max_age_s,
        "thresholds": th,
    }
    if expirable < th["min-expirable-snapshots"]:
        why = (
            f"{expirable} of {s.snapshots} snapshots older than {_age(s.snapshot_max_age_s)} beyond "
            f"retain-last (min-expirable-snapshots {th['min-expirable-snapshots']:g}; the oldest {days:.1f} d)"
        )
        return Check("expire-snapshots", False, figures, why)
    points = max(3, round(60 * min(1.0, math.log10(1 + expirable) / 4)))
    reason = (
        f"{expirable} of {s.snapshots} snapshots are older than "
        f"{_age(s.snapshot_max_age_s)} (the oldest {days:.1f} d)"
    )
    return Check(
        "expire-snapshots", True, figures, reason, Finding("snapshots", points, "expire-snapshots", reason)
    )


def _manifests(s: FileStats) -> Check:
    th = thresholds_of(s, "rewrite-manifests")
    needed = max(1, math.ceil(s.manifest_bytes / MANIFEST_TARGET_BYTES))
    bound = th["manifests-per-needed"] * needed
    figures = {
        "manifests": s.manifests,
        "manifest_bytes": s.manifest_bytes,
        "manifests_needed": needed,
        "thresholds": th,
    }
    if s.manifests < th["min-manifests"] or s.manifests <= bound:
        why = (
            f"{s.manifests} manifests ({_mib(s.manifest_bytes)}) where {needed} would do: fewer than "
            f"min-manifests {th['min-manifests']:g} or not more than manifests-per-needed "
            f"{th['manifests-per-needed']:g} × {needed}"
        )
        return Check("rewrite-manifests", False, figures, why)
    points = max(1, round(30 * min(1.0, (s.manifests - bound) / 100)))
    reason = f"{s.manifests} manifests ({_mib(s.manifest_bytes)}) where {needed} would do"
    return Check(
        "rewrite-manifests", True, figures, reason, Finding("manifests", points, "rewrite-manifests", reason)
    )


_CHECKS: dict[str, Callable[[FileStats], Check]] = {
    "rewrite-files": _small_files,
    "rewrite-deletes": _delete_files,
    "expire-snapshots": _snapshots,
    "rewrite-manifests": _manifests,
}


def score(stats: FileStats) -> HealthScore:
    """The table's score and findings (the table in this module's docstring)."""
    findings: list[Finding] = []
    for action, check in _CHECKS.items():
        found = check(stats).finding
        if found is not None:
            findings.append(found)
        if action == "rewrite-files" and (over := _over_partitioned(stats)) is not None:
            findings.append(over)
    return HealthScore(max(0, 100 - sum(f.points for f in findings)), tuple(findings))


# ---- the gate's decision ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """Whether a run of ``action`` pays on a table, from its health read (no JVM): the gate's answer. A
    skip's process summary carries it (:meth:`summary`), so "why did nothing happen?" reads the figures."""

    action: str
    pays: bool
    reason: str
    figures: dict[str, Any]
    score: int

    def summary(self) -> dict[str, Any]:
        """The skipped process's summary: ``declined`` as a factory's refusal, plus the figures."""
        return {
            "skipped": True,
            "declined": True,
            "gate": "health",
            "reason": f"does not pay now: {self.reason}",
            "health": {"score": self.score, "action": self.action, "figures": self.figures},
        }


def decide(reading: FileStats | FormatHealth, action: str) -> Decision:
    """Whether ``action`` pays on the table ``reading`` measured: its check (the built-in figures) or, for a
    format's own health, whether one of its findings names the action. The same findings as :func:`score`."""
    if isinstance(reading, FormatHealth):
        named = [f for f in reading.findings if f.action == action]
        reason = (
            "; ".join(f.reason for f in named)
            if named
            else f"no finding of the {reading.format} health read names {action}"
        )
        figures = {**reading.figures, "findings": [f.to_dict() for f in reading.findings]}
        return Decision(action, bool(named), reason, figures, reading.score.score)
    check = _CHECKS.get(action)
    if check is None:
        return Decision(action, True, f"{action} is not measured from metadata", {}, score(reading).score)
    result = check(reading)
    figures = {**result.figures, "snapshot_id": reading.snapshot_id}
    health = score(reading)
    # Another check's finding may name the action (a table whose deletes are all v3 deletion vectors: the
    # delete finding names rewrite-files): the action pays then too.
    named = [f for f in health.findings if f.action == action] if not result.pays else []
    if named:
        figures["findings"] = [f.to_dict() for f in named]
        return Decision(action, True, "; ".join(f.reason for f in named), figures, health.score)
    return Decision(action, result.pays, result.reason, figures, health.score)


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
