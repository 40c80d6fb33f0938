"""What an action is, before any action exists: :class:`ActionSettings` (the scheduling knobs every action
shares, and its floors), :class:`Action` and :class:`ActionRegistry`. Each format declares its own actions
in its :class:`~airflow_tablemgmt.core.formats.Format`; ``core/actions.py`` holds the registry of all, with
the generic ones (a dynamic table's ``refresh``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from airflow_tablemgmt.core.durations import Duration, format_duration
from airflow_tablemgmt.core.errors import UnknownAction
from airflow_tablemgmt.core.thresholds import ActionThresholds, validate_thresholds
from airflow_tablemgmt.core.triggers import Interval

_ACTION_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def kebab(name: str) -> str:
    return name.replace("_", "-")


class ActionSettings(BaseModel):
    """Scheduling knobs shared by every action. ``None`` means "the factory's default"."""

    # defer_build: a model's validator is built when it first validates, not at import, so a process
    # that validates one table's actions (a maintenance run, the Spark job) builds only those models.
    model_config = ConfigDict(
        alias_generator=kebab, populate_by_name=True, extra="forbid", frozen=True, defer_build=True
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
        default=timedelta(seconds=1),
        description="how often the triggerer checks the table for a new snapshot (event-driven actions)",
    )
    timeout: Duration | None = Field(
        default=None,
        description="how long one run may take (the task's execution_timeout; core/time_limits.py): default "
        "[tablemgmt] maintenance_timeout (4h); a refresh's comes from its dynamic table's timeout",
    )
    thresholds: dict[str, int | float] = Field(
        default_factory=dict,
        description="when a run pays: threshold name -> number, checked on the table's health before any "
        "job starts (core/thresholds.py; docs/health.md); absent: the documented defaults",
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

    # "before": the action's own names and ranges (core/thresholds.py), refused naming the action, the
    # name and the allowed ones. The action comes from the validation context (Action.settings).
    @field_validator("thresholds", mode="before")
    @classmethod
    def _thresholds(cls, v: Any, info: Any) -> Any:
        context = info.context or {}
        if v is None:
            return {}
        if "action" not in context:
            return v
        checked = validate_thresholds(context["action"], context.get("thresholds"), v)
        return {k: int(n) if n.is_integer() else n for k, n in checked.items()}

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
                    f"{kebab(option)}: {format_duration(value)} is below the {label} floor, which {why}; "
                    f"allowed: >= {format_duration(floor)}, or set allow-below-floor: true to override"
                )
        return self

    def below_floor(self) -> list[str]:
        """The options below their floor (allowed by ``allow-below-floor``), as text for a warning."""
        return [
            f"{kebab(option)} {format_duration(getattr(self, option))} is below the {label} floor"
            for option, floor, label, _ in self.FLOORS
            if getattr(self, option) < floor
        ]

    def options(self) -> dict[str, Any]:
        """The action-specific options (everything not shared), kebab-case, JSON-ready."""
        shared = set(ActionSettings.model_fields)
        data = self.model_dump(mode="json", by_alias=True, include=set(type(self).model_fields) - shared)
        return data


@dataclass(frozen=True)
class Action:
    """A registered action: kebab-case name, its settings model, and whether it rewrites the table.
    ``thresholds``: the action is gated on its table's health, with these thresholds (core/thresholds.py)."""

    name: str
    settings_model: type[ActionSettings]
    mutates: bool
    description: str
    thresholds: ActionThresholds | None = None

    def __post_init__(self) -> None:
        if not _ACTION_NAME.match(self.name):
            raise ValueError(f"action name {self.name!r} must be lowercase kebab-case")

    def settings(self, raw: dict[str, Any] | None) -> ActionSettings:
        context = {"action": self.name, "thresholds": self.thresholds}
        return self.settings_model.model_validate(raw or {}, context=context)

    def __str__(self) -> str:
        return self.name


class _Formats(Protocol):
    """What the registry asks of ``core.formats.FormatRegistry`` (not imported: it imports this module)."""

    def find(self, name: object) -> Any: ...

    def builtin(self) -> list[Any]: ...

    def loaded(self) -> list[Any]: ...

    def all(self) -> list[Any]: ...


class ActionRegistry:
    """Name -> Action: the generic actions registered here (a dynamic table's ``refresh``) and every format's
    own (its :class:`~airflow_tablemgmt.core.formats.Format`'s actions, asked of ``formats``).

    A table of a format gets its format's action of a name (a plugin's ``expire-snapshots`` takes its own
    options, Iceberg's keeps Iceberg's); a name asked alone, the generic one or the first format's that has
    it, built-in formats first."""

    def __init__(self, formats: _Formats) -> None:
        self._actions: dict[str, Action] = {}
        self._formats = formats

    def register(self, action: Action) -> Action:
        existing = self._actions.get(action.name)
        if existing is not None and existing != action:
            raise ValueError(f"action {action.name!r} is already registered")
        self._actions[action.name] = action
        return action

    def get(self, name: str, format: str | None = None) -> Action:
        if format is not None:
            fmt = self._formats.find(format)
            own = fmt.action(name) if fmt is not None else None
            if own is not None:
                return own
        found = self._actions.get(name)
        for fmts in (self._formats.builtin, self._formats.all):
            if found is None:
                found = next((a for f in fmts() if (a := f.action(name)) is not None), None)
        if found is None:
            raise UnknownAction(name, self.all_names())
        return found

    def names(self) -> list[str]:
        """The generic actions' and the built-in formats' (the JSON schema, the CLI's help): what this
        package documents does not depend on the plugins installed."""
        return sorted({*self._actions, *(a.name for f in self._formats.builtin() for a in f.actions)})

    def all_names(self) -> list[str]:
        """Every action's name, the installed plugins' included."""
        return sorted({*self._actions, *(a.name for f in self._formats.all() for a in f.actions)})

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self._actions:
            return True
        # The formats loaded so far first: a table's task start loads its own format only.
        loaded = (self._formats.loaded, self._formats.builtin, self._formats.all)
        return any(any(f.action(name) for f in fmts()) for fmts in loaded)
