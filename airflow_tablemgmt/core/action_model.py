"""What an action is, before any action exists: :class:`ActionSettings` (the scheduling knobs every action
shares, and its floors), :class:`Action` and :class:`ActionRegistry`. ``core/actions.py`` defines Iceberg's
actions and the registry of all; ``core/format_actions.py`` Delta's and Hudi's. Both import only this.

:data:`FORMATS` holds what each table format declares it supports (its actions' names), read when a table
is registered; a format plugin (an ``airflow_tablemgmt.process_factories`` entry point outside this
package) declares its format and actions when it is imported, which :func:`load_format_plugins` does the
first time a name no built-in declares is asked for."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from airflow_tablemgmt.core.durations import Duration, format_duration
from airflow_tablemgmt.core.errors import UnknownAction
from airflow_tablemgmt.core.triggers import Interval

log = logging.getLogger(__name__)

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
        default=timedelta(seconds=10), description="snapshot poll of an event-driven action, in the triggerer"
    )
    timeout: Duration | None = Field(
        default=None,
        description="how long one run may take (the task's execution_timeout; core/time_limits.py): default "
        "[tablemgmt] maintenance_timeout (4h); a refresh's comes from its dynamic table's timeout",
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
    """Name -> Action. Factories may register their own actions; names are unique per format.

    An action registered for a format (``register(action, format="paimon")``) is that format's settings
    model for the name; a table of the format gets it, every other table the shared one of the same name
    (a plugin's ``expire-snapshots`` takes Paimon's options, Iceberg's keeps Iceberg's)."""

    def __init__(self) -> None:
        self._actions: dict[str, Action] = {}
        self._by_format: dict[str, dict[str, Action]] = {}

    def register(self, action: Action, format: str | None = None) -> Action:
        table = self._actions if format is None else self._by_format.setdefault(str(format), {})
        existing = table.get(action.name)
        if existing is not None and existing != action:
            where = "" if format is None else f" for format {format!r}"
            raise ValueError(f"action {action.name!r} is already registered{where}")
        table[action.name] = action
        return action

    def get(self, name: str, format: str | None = None) -> Action:
        if format is not None:
            own = self._by_format.get(str(format), {}).get(name)
            if own is not None:
                return own
        found = self._actions.get(name)
        if found is None and format is None:  # a plugin format's own action, asked for by name alone
            found = next((a[name] for a in self._by_format.values() if name in a), None)
        if found is None and load_format_plugins():
            return self.get(name, format)  # a plugin's action, known now that the plugins are imported
        if found is None:
            raise UnknownAction(name, self.all_names())
        return found

    def names(self) -> list[str]:
        """The built-in actions' names (the JSON schema, the CLI's help); a plugin's are not among them, so
        what this package documents does not depend on the plugins installed."""
        return sorted(self._actions)

    def all_names(self) -> list[str]:
        """Every action's name, the installed plugins' included (once they are loaded)."""
        return sorted({*self._actions, *(n for a in self._by_format.values() for n in a)})

    def __contains__(self, name: object) -> bool:
        return name in self._actions or any(name in a for a in self._by_format.values())


class FormatRegistry:
    """What each table format declares it supports: format -> the names of its actions.

    Generic code (registration, the CLI, REST) reads it and never names a format; a format that declared
    nothing is not known. Built-in formats declare theirs in ``core/actions.py``; a plugin through
    ``airflow_tablemgmt.factories.api.declare_format``."""

    def __init__(self) -> None:
        self._support: dict[str, set[str]] = {}

    def declare(self, format: str, actions: Iterable[Action | str]) -> None:
        names = {a.name if isinstance(a, Action) else str(a) for a in actions}
        self._support.setdefault(str(format), set()).update(names)

    def known(self) -> list[str]:
        return sorted(self._support)

    def __contains__(self, format: object) -> bool:
        return str(format) in self._support

    def supported(self, format: str) -> set[str]:
        return set(self._support.get(str(format), set()))

    def unsupported_action(self, table_id: str, format: str, action: str) -> str | None:
        """Why ``table_id`` (of ``format``) cannot have ``action``, or None when its format supports it."""
        if str(format) not in self._support:
            return None  # the format itself is refused where it is validated
        supported = self._support[str(format)]
        if action in supported:
            return None
        return (
            f"table {table_id}: action {action!r} is not supported by its format {str(format)!r}; "
            f"the {format} format supports: {', '.join(sorted(supported))}"
        )


FORMATS = FormatRegistry()

#: The entry-point group of process factories; a format plugin registers its factory here.
PLUGIN_GROUP = "airflow_tablemgmt.process_factories"
_plugins_loaded = False


def load_format_plugins() -> bool:
    """Import every format plugin once (entry points of :data:`PLUGIN_GROUP` outside this package), so the
    formats and actions they declare at import are known; True on the first call (the one that imported).

    Called on a miss only (a format or an action name no built-in declares), so a process that handles
    built-in formats never scans the installed distributions. A broken plugin is logged and skipped."""
    global _plugins_loaded
    if _plugins_loaded:
        return False
    _plugins_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=PLUGIN_GROUP):
        if ep.value.split(":")[0].split(".")[0] == "airflow_tablemgmt":
            continue
        try:
            ep.load()
        except Exception as e:  # noqa: BLE001 - a broken plugin must not take the others down
            log.error("format plugin %r (%s) failed to load: %s", ep.name, ep.value, e)
    return True


def known_format(value: str) -> str:
    """``value`` as a declared table format (loading the format plugins when no built-in declares it)."""
    text = str(value).strip().lower()
    if text not in FORMATS:
        load_format_plugins()
    if text not in FORMATS:
        raise ValueError(
            f"{value!r} is not a known table format; known: {', '.join(FORMATS.known())} "
            "(a format plugin adds its own: docs/writing-a-format-plugin.md)"
        )
    return text
