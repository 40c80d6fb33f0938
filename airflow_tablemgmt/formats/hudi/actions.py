"""Apache Hudi's actions: ``compaction``, ``clean``, ``clustering`` and ``archive``, their options following
Hudi's procedures (``run_compaction``, ``run_clean``, ``run_clustering``, ``archive_commits``). Floors work
as every action's do: a destructive retention below its floor needs an explicit ``allow-below-floor: true``."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from pydantic import Field, field_validator, model_validator

from airflow_tablemgmt.core.action_model import Action, ActionSettings
from airflow_tablemgmt.core.durations import Duration
from airflow_tablemgmt.core.identifiers import validate_identifier
from airflow_tablemgmt.core.thresholds import ActionThresholds

#: Set by the Hudi factory on a retry: the compaction instant the interrupted attempt scheduled.
COMPACTION_INSTANT_OPTION = "compaction-instant"


def _columns(v: list[str]) -> list[str]:
    return [validate_identifier(c, "column") for c in v]


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


# Compaction, clean and archive run when the table's health hook (metadata.py) finds what they fix, decided
# with their own options (min-delta-commits, retain-commits, max-commits: Hudi's own triggers), so they are
# gated with no threshold of their own; clustering reclusters by choice and is not gated.
HUDI_COMPACTION = Action(
    "compaction",
    HudiCompactionSettings,
    True,
    "Hudi: compact log files into base files (MOR)",
    ActionThresholds.of("compaction"),
)
HUDI_CLEAN = Action(
    "clean", HudiCleanSettings, True, "Hudi: delete old file slices (run_clean)", ActionThresholds.of("clean")
)
HUDI_CLUSTERING = Action(
    "clustering", HudiClusteringSettings, True, "Hudi: recluster file groups (run_clustering)"
)
HUDI_ARCHIVE = Action(
    "archive",
    HudiArchiveSettings,
    True,
    "Hudi: archive old instants off the active timeline (archive_commits)",
    ActionThresholds.of("archive"),
)

#: What the descriptor declares.
ACTIONS = (HUDI_COMPACTION, HUDI_CLEAN, HUDI_CLUSTERING, HUDI_ARCHIVE)
