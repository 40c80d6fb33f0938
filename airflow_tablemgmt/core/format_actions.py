"""The actions of Delta and Hudi tables: their settings models, declared by the formats' descriptors
(formats/delta, formats/hudi). Each format's options follow its own procedures: Delta's
``OPTIMIZE`` / ``VACUUM``, Hudi's ``run_compaction`` / ``run_clean`` / ``run_clustering`` / ``archive_commits``.
Floors work as the Iceberg actions' do: a destructive retention below its floor needs an explicit
``allow-below-floor: true``, and Delta's own retention check is never turned off.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from pydantic import Field, field_validator, model_validator

from airflow_tablemgmt.core.action_model import Action, ActionSettings
from airflow_tablemgmt.core.durations import Duration, format_duration
from airflow_tablemgmt.core.formats import (
    FORMAT_MODULE_PROPERTY,
    TABLE_FORMAT_PROPERTY,
    TABLE_LOCATION_OPTION,
)
from airflow_tablemgmt.core.identifiers import validate_identifier

#: Set by the Hudi factory on a retry: the compaction instant the interrupted attempt scheduled.
COMPACTION_INSTANT_OPTION = "compaction-instant"
#: Set by the Delta factory when a vacuum must not delete (the first-run policy): why.
VACUUM_DRY_RUN_REASON_OPTION = "dry-run-reason"

#: Scalar values a partition filter compares a partition column with (``column = value``).
PartitionValue = str | int | bool


def _columns(v: list[str]) -> list[str]:
    return [validate_identifier(c, "column") for c in v]


def _partition_filter(v: dict[str, PartitionValue]) -> dict[str, PartitionValue]:
    for column in v:
        validate_identifier(column, "partition-filter column")
    return v


class OptimizeSettings(ActionSettings):
    """Delta ``OPTIMIZE``: bin-pack small files, or ``ZORDER BY`` columns, in all or some partitions."""

    zorder_by: list[str] = Field(default_factory=list, description="columns to Z-order by; empty: bin-pack")
    partition_filter: dict[str, PartitionValue] = Field(
        default_factory=dict,
        description="equality filter on partition columns ({day: '2026-11-25'}); empty: the whole table",
    )
    min_new_files: int = Field(
        default=1,
        ge=0,
        description="files added since the last OPTIMIZE (read from the Delta log) below which the run is "
        "skipped; 0: always run",
    )

    _cols = field_validator("zorder_by")(_columns)
    _filter = field_validator("partition_filter")(_partition_filter)


VACUUM_FLOOR = timedelta(hours=24)


class VacuumSettings(ActionSettings):
    """Delta ``VACUUM``: delete files no version within the retention references. The first run (and the
    first after ``retain`` changes) is a dry run unless ``confirm: true``, as expire-data's is."""

    retain: Duration | None = Field(
        default=None,
        description="keep files needed by versions this recent; default: the table's "
        "delta.deletedFileRetentionDuration (7 days unless set)",
    )
    dry_run: bool = Field(default=False, description="list the files VACUUM would delete; delete nothing")
    confirm: bool = Field(default=False, description="delete on the first run (no dry run first)")
    sample_size: int = Field(default=20, ge=0, le=1000, description="paths listed in the summary")
    allow_below_floor: bool = Field(
        default=False, description="explicit, logged override of the 24-hour floor on retain"
    )

    # Not FLOORS: an unset retain is the table's own retention, which Delta's check already guards.
    @model_validator(mode="after")
    def _retain_floor(self) -> VacuumSettings:
        if self.retain is not None and self.retain < VACUUM_FLOOR and not self.allow_below_floor:
            raise ValueError(
                f"retain: {format_duration(self.retain)} is below the 24-hour floor, which protects readers "
                "of recent versions; allowed: >= 24h, or set allow-below-floor: true to override "
                "(Delta's own retention check still applies)"
            )
        return self

    def below_floor(self) -> list[str]:
        if self.retain is not None and self.retain < VACUUM_FLOOR:
            return [f"retain {format_duration(self.retain)} is below the 24-hour floor"]
        return []


class HudiCompactionSettings(ActionSettings):
    """Hudi ``run_compaction`` on a merge-on-read table, in RFC-43's two phases: schedule an instant, then
    execute it. A pending compaction (this process's retry, or one a writer scheduled) is executed
    before any new one is scheduled."""

    min_delta_commits: int = Field(
        default=5,
        ge=1,
        description="completed delta commits since the last compaction before one is scheduled "
        "(read from the timeline without a JVM; hoodie.compact.inline.max.delta.commits)",
    )


CLEAN_HOURS_FLOOR = timedelta(hours=1)


class HudiCleanSettings(ActionSettings):
    """Hudi ``run_clean``: delete file slices older than the retained commits (or hours, or versions)."""

    FLOORS = (("retain_hours", CLEAN_HOURS_FLOOR, "1-hour", "keeps the files of running queries"),)

    policy: str = Field(
        default="KEEP_LATEST_COMMITS",
        description="KEEP_LATEST_COMMITS, KEEP_LATEST_BY_HOURS or KEEP_LATEST_FILE_VERSIONS",
    )
    retain_commits: int = Field(default=10, ge=1)
    retain_hours: Duration = timedelta(hours=24)
    retain_file_versions: int = Field(default=1, ge=1)
    allow_below_floor: bool = Field(
        default=False, description="explicit, logged override of the 1-hour floor on retain-hours"
    )

    @field_validator("policy")
    @classmethod
    def _policy(cls, v: str) -> str:
        allowed = ("KEEP_LATEST_COMMITS", "KEEP_LATEST_BY_HOURS", "KEEP_LATEST_FILE_VERSIONS")
        if v.upper() not in allowed:
            raise ValueError(f"{v!r} is not a Hudi cleaning policy; allowed: {', '.join(allowed)}")
        return v.upper()

    @model_validator(mode="after")
    def _whole_hours(self) -> HudiCleanSettings:
        if self.retain_hours % timedelta(hours=1):
            raise ValueError("retain-hours: Hudi retains whole hours; write a multiple of 1h")
        return self


class ClusteringLayout(StrEnum):
    LINEAR = "linear"
    ZORDER = "z-order"
    HILBERT = "hilbert"


class HudiClusteringSettings(ActionSettings):
    """Hudi ``run_clustering``: rewrite file groups sorted by ``sort-columns`` (linear, z-order or hilbert)."""

    sort_columns: list[str] = Field(min_length=1, description="the columns to sort or space-fill by")
    layout: ClusteringLayout = ClusteringLayout.LINEAR

    _cols = field_validator("sort_columns")(_columns)


ARCHIVE_MIN_COMMITS_FLOOR = 5


class HudiArchiveSettings(ActionSettings):
    """Hudi ``archive_commits``: move completed instants off the active timeline once it holds more than
    ``max-commits``, down to ``min-commits``; Hudi never archives past the last clean's earliest retained
    commit or a pending compaction or clustering."""

    min_commits: int = Field(default=20, ge=1, description="instants the active timeline keeps")
    max_commits: int = Field(default=30, ge=2, description="instants on the timeline before it archives")
    retain_commits: int = Field(default=10, ge=1, description="commits the clean retains (< min-commits)")
    allow_below_floor: bool = Field(
        default=False, description="explicit, logged override of the 5-commit floor on min-commits"
    )

    @model_validator(mode="after")
    def _bounds(self) -> HudiArchiveSettings:
        if self.min_commits < ARCHIVE_MIN_COMMITS_FLOOR and not self.allow_below_floor:
            raise ValueError(
                f"min-commits: {self.min_commits} is below the floor of {ARCHIVE_MIN_COMMITS_FLOOR}, which keeps "
                "the instants incremental readers and time travel need on the active timeline; allowed: >= "
                f"{ARCHIVE_MIN_COMMITS_FLOOR}, or set allow-below-floor: true to override"
            )
        if self.max_commits <= self.min_commits:
            raise ValueError(
                f"max-commits: {self.max_commits} must be greater than min-commits ({self.min_commits})"
            )
        if self.retain_commits >= self.min_commits:
            raise ValueError(
                f"retain-commits: {self.retain_commits} must be less than min-commits ({self.min_commits}), "
                "as Hudi requires (hoodie.keep.min.commits > hoodie.clean.commits.retained)"
            )
        return self

    def below_floor(self) -> list[str]:
        if self.min_commits < ARCHIVE_MIN_COMMITS_FLOOR:
            return [f"min-commits {self.min_commits} is below the floor of {ARCHIVE_MIN_COMMITS_FLOOR}"]
        return []


OPTIMIZE = Action("optimize", OptimizeSettings, True, "Delta: bin-pack or Z-order data files (OPTIMIZE)")
VACUUM = Action("vacuum", VacuumSettings, True, "Delta: delete files past the retention (VACUUM)")
HUDI_COMPACTION = Action(
    "compaction", HudiCompactionSettings, True, "Hudi: compact log files into base files (MOR)"
)
HUDI_CLEAN = Action("clean", HudiCleanSettings, True, "Hudi: delete old file slices (run_clean)")
HUDI_CLUSTERING = Action(
    "clustering", HudiClusteringSettings, True, "Hudi: recluster file groups (run_clustering)"
)
HUDI_ARCHIVE = Action(
    "archive",
    HudiArchiveSettings,
    True,
    "Hudi: archive old instants off the active timeline (archive_commits)",
)

#: Declared by the formats' descriptors (formats/delta, formats/hudi).
DELTA_ACTIONS = (OPTIMIZE, VACUUM)
HUDI_ACTIONS = (HUDI_COMPACTION, HUDI_CLEAN, HUDI_CLUSTERING, HUDI_ARCHIVE)

__all__ = [
    "COMPACTION_INSTANT_OPTION",
    "DELTA_ACTIONS",
    "FORMAT_MODULE_PROPERTY",
    "HUDI_ACTIONS",
    "TABLE_FORMAT_PROPERTY",
    "TABLE_LOCATION_OPTION",
    "VACUUM_DRY_RUN_REASON_OPTION",
]
