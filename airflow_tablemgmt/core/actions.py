"""The action registry: every action by kebab-case name, with its validated options: the generic ones
registered here (a dynamic table's ``refresh``) and each format's own, declared by its descriptor
(``formats/<format>/actions.py``).

Each action's settings model holds the scheduling knobs every action shares (``enabled``,
``interval``, ``on-new-snapshot`` ...) plus its own options, flat, so a declaration reads
``expire-snapshots: {retain-last: 3}`` and an error reads
``tables[0].actions.expire-snapshots.retain-last: ...``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from airflow_tablemgmt.core.action_model import Action, ActionRegistry, ActionSettings
from airflow_tablemgmt.core.formats import FORMATS


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


#: Every action: the generic ones registered here, each format's own through its descriptor (core/formats.py).
ACTIONS = ActionRegistry(FORMATS)
REFRESH = ACTIONS.register(Action("refresh", RefreshSettings, True, "refresh a dynamic table from its query"))

__all__ = ["ACTIONS", "Action", "ActionRegistry", "ActionSettings", "REFRESH", "RefreshSettings"]
