"""Delta Lake's actions: ``optimize`` and ``vacuum``, their options following Delta's own ``OPTIMIZE`` and
``VACUUM``. Floors work as every action's do: a destructive retention below its floor needs an explicit
``allow-below-floor: true``, and Delta's own retention check is never turned off."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, field_validator, model_validator

from airflow_tablemgmt.core.action_model import Action, ActionSettings
from airflow_tablemgmt.core.durations import Duration, format_duration
from airflow_tablemgmt.core.identifiers import validate_identifier
from airflow_tablemgmt.core.thresholds import ActionThresholds, Threshold

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


#: A bin-pack OPTIMIZE runs when the table's health hook finds small files it would remove (metadata.py).
OPTIMIZE_THRESHOLDS = ActionThresholds.of(
    "optimize",
    Threshold(
        "min-small-files",
        5,
        "files under 75 % of OPTIMIZE's target the table must hold before a bin-pack pays (AWS Glue: 100, "
        "Amoro: 12), besides OPTIMIZE removing at least one file",
        minimum=1,
    ),
)
OPTIMIZE = Action(
    "optimize",
    OptimizeSettings,
    True,
    "Delta: bin-pack or Z-order data files (OPTIMIZE)",
    OPTIMIZE_THRESHOLDS,
)
VACUUM = Action("vacuum", VacuumSettings, True, "Delta: delete files past the retention (VACUUM)")
#: What the descriptor declares.
ACTIONS = (OPTIMIZE, VACUUM)
