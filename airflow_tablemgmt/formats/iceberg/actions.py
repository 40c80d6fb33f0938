"""Apache Iceberg's actions, their options following Iceberg's Spark procedures (``rewrite_data_files``,
``rewrite_position_delete_files``, ``rewrite_manifests``, ``expire_snapshots``, ``remove_orphan_files``,
``compute_table_stats``) and its row TTL. Floors work as every action's do: a destructive age below its floor
needs an explicit ``allow-below-floor: true``."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from airflow_tablemgmt.core import thresholds
from airflow_tablemgmt.core.action_model import Action, ActionSettings
from airflow_tablemgmt.core.durations import Duration
from airflow_tablemgmt.core.identifiers import validate_identifier

MiB = 1024 * 1024


def _columns(v: list[str]) -> list[str]:
    return [validate_identifier(c, "column") for c in v]


class RewriteStrategy(StrEnum):
    BINPACK = "binpack"
    SORT = "sort"
    ZORDER = "zorder"


class RewriteFilesSettings(ActionSettings):
    """``rewrite_data_files``: compact small files (binpack) or recluster them (sort / zorder)."""

    strategy: RewriteStrategy = RewriteStrategy.BINPACK
    sort_columns: list[str] = Field(default_factory=list)
    target_file_size_bytes: int = Field(default=512 * MiB, ge=1 * MiB)
    min_input_files: int = Field(default=5, ge=1)
    where: str | None = None
    partial_progress: bool = False
    max_concurrent_file_group_rewrites: int = Field(default=5, ge=1)
    rewrite_all: bool = False
    # Deletes (rewrite_data_files' options; None leaves Iceberg's default): a data file past either threshold
    # is rewritten whatever its size, and its group whatever min-input-files, so the rewrite applies its
    # deletes (a v3 table's deletion vectors included: Iceberg drops a rewritten file's vector with it).
    delete_ratio_threshold: float | None = Field(
        default=None,
        description="rewrite a data file whose deletes mark at least this fraction of its rows deleted "
        "(> 0 and <= 1; Iceberg's default 0.3)",
    )
    delete_file_threshold: int | None = Field(
        default=None,
        ge=1,
        description="rewrite a data file with at least this many delete files (Iceberg's default: never)",
    )
    remove_dangling_deletes: bool = Field(
        default=False,
        description="after the rewrite, remove delete files that no longer apply to any live data file "
        "(Iceberg's remove-dangling-deletes; one more commit when there are some)",
    )

    _cols = field_validator("sort_columns")(_columns)

    @field_validator("delete_ratio_threshold", mode="before")
    @classmethod
    def _ratio(cls, v: Any) -> Any:
        allowed = "a fraction of a data file's rows, > 0 and <= 1 (Iceberg's default 0.3)"
        if v is None:
            return v
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            raise ValueError(f"must be {allowed}, got {v!r}")
        try:
            ratio = float(v)
        except ValueError:
            raise ValueError(f"must be {allowed}, got {v!r}") from None
        if not 0 < ratio <= 1:  # NaN fails too
            raise ValueError(f"must be {allowed}, got {v!r}")
        return ratio

    @model_validator(mode="after")
    def _strategy_needs_columns(self) -> RewriteFilesSettings:
        if self.strategy != RewriteStrategy.BINPACK and not self.sort_columns:
            raise ValueError(f"sort-columns: strategy {self.strategy.value!r} needs at least one column")
        if self.strategy == RewriteStrategy.BINPACK and self.sort_columns:
            raise ValueError("sort-columns: only used with strategy 'sort' or 'zorder', not 'binpack'")
        return self


class RewriteDeletesSettings(ActionSettings):
    """``rewrite_position_delete_files``: compact position delete files, dropping dangling deletes."""

    min_input_files: int = Field(default=5, ge=1)
    rewrite_all: bool = False


class RewriteManifestsSettings(ActionSettings):
    """``rewrite_manifests``: regroup manifests by partition for faster planning."""

    use_caching: bool = False


EXPIRE_SNAPSHOTS_FLOOR = timedelta(hours=1)


class ExpireSnapshotsSettings(ActionSettings):
    """``expire_snapshots``: drop old snapshots and the files only they reference."""

    FLOORS = (("older_than", EXPIRE_SNAPSHOTS_FLOOR, "1-hour", "keeps the snapshots of recent commits"),)

    older_than: Duration = timedelta(days=5)
    retain_last: int = Field(default=1, ge=1)
    max_concurrent_deletes: int = Field(default=4, ge=1)
    allow_below_floor: bool = Field(
        default=False, description="explicit, logged override of the 1-hour floor on older-than"
    )


ORPHAN_FLOOR = timedelta(hours=24)
EXPIRE_DATA_FLOOR = timedelta(days=1)


class DeleteOrphansSettings(ActionSettings):
    """``remove_orphan_files``: delete files under the table location that no snapshot references."""

    FLOORS = (("older_than", ORPHAN_FLOOR, "24-hour", "protects files of in-flight commits"),)

    older_than: Duration = timedelta(days=3)
    dry_run: bool = False
    sample_size: int = Field(default=20, ge=0, le=1000)
    allow_below_floor: bool = Field(
        default=False, description="explicit, logged override of the 24-hour floor on older-than"
    )
    # Iceberg's rules for matching a listed file against the paths the metadata references (object stores
    # name one bucket several ways: s3a:// vs s3://, an endpoint alias). A listed file whose scheme or
    # authority matches no referenced one is never deleted: ERROR fails the run, IGNORE skips the file.
    equal_schemes: dict[str, str] = Field(
        default_factory=dict, description="schemes to treat as equal, e.g. {s3a: s3, s3n: s3}"
    )
    equal_authorities: dict[str, str] = Field(
        default_factory=dict, description="authorities (buckets, hosts) to treat as equal"
    )
    prefix_mismatch_mode: Literal["ERROR", "IGNORE"] = Field(
        default="ERROR",
        description="a listed file under a prefix the metadata does not use: fail (ERROR) or skip it (IGNORE); "
        "never deleted",
    )


# The option through which the expire-data job learns why it must not delete: the contract between
# the iceberg factory, which sets it, and the job's maintainer (formats/iceberg/job/ttl.py), which
# takes it out before validating. Declarations cannot set it (ExpireDataSettings forbids unknown keys).
DRY_RUN_REASON_OPTION = "dry-run-reason"
#: Set only by the Iceberg factory for expire-snapshots (the settings model forbids it in declarations):
#: {dynamic table: snapshot id of this table its next refresh reads from}; the job keeps those snapshots.
KEEP_SNAPSHOTS_OPTION = "keep-snapshots-for"


class ExpireDataSettings(ActionSettings):
    """Row TTL (Amoro's data expiration): delete rows whose ``column`` is older than ``retention``."""

    FLOORS = (("retention", EXPIRE_DATA_FLOOR, "1-day", "guards against a retention meant in days"),)

    column: str
    retention: Duration
    allow_below_floor: bool = Field(
        default=False, description="explicit, logged override of the 1-day floor on retention"
    )
    dry_run: bool = Field(
        default=False, description="report the rows and files it would delete; delete nothing"
    )
    confirm: bool = Field(
        default=False,
        description="run for real on the first run; without it the first run of expire-data is a dry run",
    )

    _col = field_validator("column")(lambda v: validate_identifier(v, "column"))


class ComputeStatsSettings(ActionSettings):
    """``compute_table_stats``: NDV sketches in a Puffin statistics file registered on the table."""

    columns: list[str] = Field(default_factory=list)

    _cols = field_validator("columns")(_columns)


REWRITE_FILES = Action(
    "rewrite-files", RewriteFilesSettings, True, "compact or recluster data files", thresholds.REWRITE_FILES
)
REWRITE_DELETES = Action(
    "rewrite-deletes",
    RewriteDeletesSettings,
    True,
    "rewrite position delete files",
    thresholds.REWRITE_DELETES,
)
REWRITE_MANIFESTS = Action(
    "rewrite-manifests", RewriteManifestsSettings, True, "rewrite manifests", thresholds.REWRITE_MANIFESTS
)
EXPIRE_SNAPSHOTS = Action(
    "expire-snapshots", ExpireSnapshotsSettings, True, "expire old snapshots", thresholds.EXPIRE_SNAPSHOTS
)
DELETE_ORPHANS = Action("delete-orphans", DeleteOrphansSettings, True, "delete unreferenced files")
EXPIRE_DATA = Action("expire-data", ExpireDataSettings, True, "delete rows past their TTL")
COMPUTE_STATS = Action("compute-stats", ComputeStatsSettings, True, "compute table statistics (Puffin NDV)")
#: What the descriptor declares.
ACTIONS = (
    REWRITE_FILES,
    REWRITE_DELETES,
    REWRITE_MANIFESTS,
    EXPIRE_SNAPSHOTS,
    DELETE_ORPHANS,
    EXPIRE_DATA,
    COMPUTE_STATS,
)
