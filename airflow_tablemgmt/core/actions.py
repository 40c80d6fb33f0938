"""The action registry: every maintenance action by kebab-case name, with its validated options.

Each action's settings model holds the scheduling knobs every action shares (``enabled``,
``interval``, ``on-new-snapshot`` ...) plus its own options, flat, so a declaration reads
``expire-snapshots: {retain-last: 3}`` and an error reads
``tables[0].actions.expire-snapshots.retain-last: ...``. Defaults follow Iceberg's Spark procedures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from airflow_tablemgmt.core.durations import Duration, format_duration
from airflow_tablemgmt.core.errors import UnknownAction
from airflow_tablemgmt.core.identifiers import validate_identifier
from airflow_tablemgmt.core.triggers import Interval

_ACTION_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
MiB = 1024 * 1024


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class ActionSettings(BaseModel):
    """Scheduling knobs shared by every action. ``None`` means "the factory's default"."""

    # defer_build: a model's validator is built when it first validates, not at import, so a process
    # that validates one table's actions (a maintenance run, the Spark job) builds only those models.
    model_config = ConfigDict(
        alias_generator=_kebab, populate_by_name=True, extra="forbid", frozen=True, defer_build=True
    )

    enabled: bool = True
    interval: str | None = Field(default=None, description="duration ('6h') or cron ('0 3 * * *')")
    on_new_snapshot: bool | None = None
    parallelism: int | None = Field(default=None, ge=1)
    trigger: Literal["schedule", "event"] | None = Field(
        default=None,
        description="'event' (watcher, default for snapshot-driven actions) or 'schedule' (interval only)",
    )
    fallback_interval: str | None = Field(
        default=None,
        description="event trigger: the time-based run beside the watcher (default 1d, or interval if longer)",
    )
    retries: int = Field(default=1, ge=0, le=20)
    retry_delay: Duration = timedelta(minutes=5)
    lease_wait: Duration = Field(
        default=timedelta(hours=1), description="how long to wait for the table lease"
    )
    poll_interval: Duration = Field(
        default=timedelta(seconds=10), description="snapshot poll of an event-driven action, in the triggerer"
    )

    # (option, floor, floor as written, why it exists): a destructive age below its floor needs an
    # explicit ``allow-below-floor: true``; no override ever allows zero or a negative age.
    FLOORS: ClassVar[tuple[tuple[str, timedelta, str, str], ...]] = ()

    # "before": a bare number (``interval: 30``) gets the unit hint, not "should be a valid string".
    @field_validator("interval", "fallback_interval", mode="before")
    @classmethod
    def _interval(cls, v: Any) -> Any:
        if v is not None:
            try:
                Interval.parse(v)
            except Exception as e:  # noqa: BLE001 - re-raised as a field error with the same text
                raise ValueError(str(e).removeprefix("interval: ")) from e
        return v

    @model_validator(mode="after")
    def _floors(self) -> ActionSettings:
        if not self.FLOORS:
            return self
        # __dict__, not getattr: a missing attribute goes through pydantic's slow __getattr__, which
        # at 10,000 declarations is a third of their validation.
        allowed = bool(self.__dict__.get("allow_below_floor", False))
        for option, floor, label, why in self.FLOORS:
            value: timedelta = getattr(self, option)
            if value < floor and not allowed:
                raise ValueError(
                    f"{_kebab(option)}: {format_duration(value)} is below the {label} floor, which {why}; "
                    f"allowed: >= {format_duration(floor)}, or set allow-below-floor: true to override"
                )
        return self

    def below_floor(self) -> list[str]:
        """The options below their floor (allowed by ``allow-below-floor``), as text for a warning."""
        return [
            f"{_kebab(option)} {format_duration(getattr(self, option))} is below the {label} floor"
            for option, floor, label, _ in self.FLOORS
            if getattr(self, option) < floor
        ]

    def options(self) -> dict[str, Any]:
        """The action-specific options (everything not shared), kebab-case, JSON-ready."""
        shared = set(ActionSettings.model_fields)
        data = self.model_dump(mode="json", by_alias=True, include=set(type(self).model_fields) - shared)
        return data


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

    _cols = field_validator("sort_columns")(_columns)

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
# the iceberg factory, which sets it, and the job's maintainer (spark/job/maintainers/ttl.py), which
# takes it out before validating. Declarations cannot set it (ExpireDataSettings forbids unknown keys).
DRY_RUN_REASON_OPTION = "dry-run-reason"


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


class RefreshSettings(ActionSettings):
    """A dynamic table's refresh. Never declared by hand: :meth:`DynamicTableSpec.table_spec`
    writes it from the definition (``interval`` = the freshness cron, or ``trigger: upstream`` with
    the upstream dynamic tables whose refreshes start this one)."""

    trigger: Literal["schedule", "upstream"] | None = Field(  # type: ignore[assignment]
        default=None, description="'schedule' (the freshness cron) or 'upstream' (freshness: downstream)"
    )
    freshness: str | None = Field(default=None, description="the definition's freshness, as declared")
    upstream: list[str] = Field(
        default_factory=list,
        description="trigger upstream: the dynamic tables whose refreshes start this one",
    )

    @model_validator(mode="after")
    def _schedule(self) -> RefreshSettings:
        if self.on_new_snapshot or self.fallback_interval:
            raise ValueError(
                "trigger: a refresh runs on its freshness cron or after its upstream tables' refreshes, "
                "never on new snapshots; remove on-new-snapshot / fallback-interval"
            )
        if self.trigger == "upstream":
            if not self.upstream:
                raise ValueError("upstream: trigger 'upstream' needs at least one upstream dynamic table")
            if self.interval is not None:
                raise ValueError("interval: trigger 'upstream' refreshes have no interval")
        elif self.interval is None:
            raise ValueError("interval: a refresh needs the cron of its freshness (or trigger: upstream)")
        elif self.upstream:
            raise ValueError("upstream: only with trigger 'upstream'")
        return self


#: Plain (non-dynamic) tables' validation context: ``refresh`` is declared only for dynamic tables.
PLAIN_TABLE = {"plain_table": True}
REFRESH_ON_PLAIN_TABLE = "refresh: only dynamic tables refresh; declare it under dynamic-tables:"


@dataclass(frozen=True)
class Action:
    """A registered action: kebab-case name, its settings model, and whether it rewrites the table."""

    name: str
    settings_model: type[ActionSettings]
    mutates: bool
    description: str

    def __post_init__(self) -> None:
        if not _ACTION_NAME.match(self.name):
            raise ValueError(f"action name {self.name!r} must be lowercase kebab-case")

    def settings(self, raw: dict[str, Any] | None) -> ActionSettings:
        return self.settings_model.model_validate(raw or {})

    def __str__(self) -> str:
        return self.name


class ActionRegistry:
    """Name -> Action. Factories may register their own actions; names are unique."""

    def __init__(self) -> None:
        self._actions: dict[str, Action] = {}

    def register(self, action: Action) -> Action:
        existing = self._actions.get(action.name)
        if existing is not None and existing != action:
            raise ValueError(f"action {action.name!r} is already registered")
        self._actions[action.name] = action
        return action

    def get(self, name: str) -> Action:
        try:
            return self._actions[name]
        except KeyError:
            raise UnknownAction(name, list(self._actions)) from None

    def names(self) -> list[str]:
        return sorted(self._actions)

    def __contains__(self, name: object) -> bool:
        return name in self._actions


ACTIONS = ActionRegistry()
REWRITE_FILES = ACTIONS.register(
    Action("rewrite-files", RewriteFilesSettings, True, "compact or recluster data files")
)
REWRITE_DELETES = ACTIONS.register(
    Action("rewrite-deletes", RewriteDeletesSettings, True, "rewrite position delete files")
)
REWRITE_MANIFESTS = ACTIONS.register(
    Action("rewrite-manifests", RewriteManifestsSettings, True, "rewrite manifests")
)
EXPIRE_SNAPSHOTS = ACTIONS.register(
    Action("expire-snapshots", ExpireSnapshotsSettings, True, "expire old snapshots")
)
DELETE_ORPHANS = ACTIONS.register(
    Action("delete-orphans", DeleteOrphansSettings, True, "delete unreferenced files")
)
EXPIRE_DATA = ACTIONS.register(Action("expire-data", ExpireDataSettings, True, "delete rows past their TTL"))
COMPUTE_STATS = ACTIONS.register(
    Action("compute-stats", ComputeStatsSettings, True, "compute table statistics (Puffin NDV)")
)
REFRESH = ACTIONS.register(Action("refresh", RefreshSettings, True, "refresh a dynamic table from its query"))

__all__ = ["ACTIONS", "Action", "ActionRegistry", "ActionSettings", "RefreshSettings"]

# The Delta and Hudi actions register themselves (core/format_actions.py): imported here so that every
# action is known once this module is.
from airflow_tablemgmt.core import format_actions as _format_actions  # noqa: E402, F401
