"""Paimon's actions and their settings, validated when a table is registered (registered for the ``paimon``
format only: Iceberg's ``expire-snapshots`` keeps its own options).

Each follows one of Paimon 0.9's Spark procedures: ``sys.compact``, ``sys.expire_snapshots``,
``sys.expire_partitions``, ``sys.remove_orphan_files``. Destructive ages have floors, as the built-in
actions' do: below one needs an explicit ``allow-below-floor: true``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import Field, field_validator, model_validator

from airflow_tablemgmt.formats.api import (
    Action,
    ActionSettings,
    ActionThresholds,
    Duration,
    Threshold,
    validate_identifier,
)

PartitionValue = str | int


class CompactSettings(ActionSettings):
    """``sys.compact``: merge a table's small files (full compaction); with ``order-strategy`` an
    append table's files are rewritten sorted (``order``) or along a z-order or hilbert curve."""

    mode: Literal["full", "minor"] = Field(
        default="full", description="full: rewrite every bucket (Paimon 0.9's Spark procedure)"
    )
    order_strategy: Literal["none", "order", "zorder", "hilbert"] = "none"
    order_by: list[str] = Field(default_factory=list, description="the columns to sort or space-fill by")
    partition_filter: dict[str, PartitionValue] = Field(
        default_factory=dict, description="compact one partition only ({dt: '2026-11-25'})"
    )
    min_new_snapshots: int = Field(
        default=1,
        ge=0,
        description="commits (APPEND snapshots, read without a JVM) since the last compaction "
        "below which the run is skipped; 0: always run",
    )

    @field_validator("order_by")
    @classmethod
    def _cols(cls, v: list[str]) -> list[str]:
        return [validate_identifier(c, "order-by column") for c in v]

    @field_validator("partition_filter")
    @classmethod
    def _filter(cls, v: dict[str, PartitionValue]) -> dict[str, PartitionValue]:
        for column, value in v.items():
            validate_identifier(column, "partition-filter column")
            if any(c in str(value) for c in "'\\,;=\n\r\0"):
                raise ValueError(
                    f"partition-filter.{column}: {value!r} contains a quote, backslash, ',', ';' or '='"
                )
        return v

    @model_validator(mode="after")
    def _shape(self) -> CompactSettings:
        if self.mode == "minor":
            raise ValueError(
                "mode: 'minor' needs the compact_strategy argument of Paimon 1.x's sys.compact; the Paimon 0.9 "
                "runtime this plugin runs compacts fully; allowed: full"
            )
        if self.order_strategy != "none" and not self.order_by:
            raise ValueError(
                f"order-by: order-strategy {self.order_strategy!r} needs the columns to order by"
            )
        if self.order_strategy == "none" and self.order_by:
            raise ValueError("order-strategy: order-by is set; name the strategy (order, zorder or hilbert)")
        return self


SNAPSHOT_AGE_FLOOR = timedelta(hours=1)


class ExpireSnapshotsSettings(ActionSettings):
    """``sys.expire_snapshots``: drop snapshots beyond ``retain-max`` or older than ``older-than``, never
    fewer than ``retain-min``."""

    FLOORS = (("older_than", SNAPSHOT_AGE_FLOOR, "1-hour", "keeps the snapshots of running readers"),)

    retain_max: int | None = Field(default=None, ge=1, description="snapshots kept at most")
    retain_min: int = Field(default=1, ge=1, description="snapshots always kept")
    older_than: Duration = Field(default=timedelta(days=1), description="expire snapshots older than this")
    max_deletes: int | None = Field(default=None, ge=1, description="snapshots deleted per run at most")
    allow_below_floor: bool = Field(
        default=False, description="explicit, logged override of the 1-hour floor"
    )

    @model_validator(mode="after")
    def _bounds(self) -> ExpireSnapshotsSettings:
        if self.retain_max is not None and self.retain_max < self.retain_min:
            raise ValueError(f"retain-max: {self.retain_max} is less than retain-min ({self.retain_min})")
        return self


PARTITION_AGE_FLOOR = timedelta(days=1)


class ExpirePartitionsSettings(ActionSettings):
    """``sys.expire_partitions``: drop partitions whose value (a date, through ``timestamp-formatter``) is
    older than ``expiration-time``."""

    FLOORS = (("expiration_time", PARTITION_AGE_FLOOR, "1-day", "keeps today's partitions"),)

    expiration_time: Duration = Field(description="partitions older than this are dropped")
    timestamp_formatter: str = Field(description="the partition value's date format, e.g. yyyy-MM-dd")
    timestamp_pattern: str | None = Field(default=None, description="how partition columns form it, e.g. $dt")
    expire_strategy: Literal["values-time", "update-time"] = "values-time"
    allow_below_floor: bool = Field(default=False, description="explicit, logged override of the 1-day floor")

    @field_validator("timestamp_formatter", "timestamp_pattern")
    @classmethod
    def _plain(cls, v: str | None) -> str | None:
        if v is not None and any(c in v for c in "'\\\n\r\0"):
            raise ValueError(f"{v!r} contains a quote, backslash or control character")
        return v


ORPHAN_AGE_FLOOR = timedelta(days=1)


class RemoveOrphansSettings(ActionSettings):
    """``sys.remove_orphan_files``: delete files no snapshot references, older than ``older-than``. The first
    run (and the first after ``older-than`` changes) is a dry run unless ``confirm: true``."""

    FLOORS = (("older_than", ORPHAN_AGE_FLOOR, "1-day", "protects the files of commits in flight"),)

    older_than: Duration = Field(default=timedelta(days=3), description="only files older than this")
    dry_run: bool = Field(default=False, description="list the orphan files; delete nothing")
    confirm: bool = Field(default=False, description="delete on the first run (no dry run first)")
    allow_below_floor: bool = Field(default=False, description="explicit, logged override of the 1-day floor")


#: A compaction pays once enough APPEND commits piled up since the last one (the health hook's finding,
#: health.py); a sorting or space-filling compaction rewrites by choice and is not gated (factory.py).
COMPACT_THRESHOLDS = ActionThresholds.of(
    "compact",
    Threshold(
        "min-commits",
        5,
        "APPEND commits since the last compaction before a compaction pays (Amoro's minor optimizing: 12 "
        "small files or 1 hour; Paimon itself compacts a bucket at 5 sorted runs)",
        minimum=1,
    ),
)
COMPACT = Action(
    "compact", CompactSettings, True, "Paimon: compact (and optionally sort) data files", COMPACT_THRESHOLDS
)
EXPIRE_SNAPSHOTS = Action("expire-snapshots", ExpireSnapshotsSettings, True, "Paimon: expire old snapshots")
EXPIRE_PARTITIONS = Action(
    "expire-partitions", ExpirePartitionsSettings, True, "Paimon: drop partitions past their expiration time"
)
REMOVE_ORPHANS = Action("remove-orphans", RemoveOrphansSettings, True, "Paimon: delete unreferenced files")

ACTIONS = (COMPACT, EXPIRE_SNAPSHOTS, EXPIRE_PARTITIONS, REMOVE_ORPHANS)
