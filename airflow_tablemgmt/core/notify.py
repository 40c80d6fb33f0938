"""Who is told what: the ``notify:`` of a table declaration and ``[tablemgmt] notify`` (the same document).

A notifier is any Airflow notifier class (``BaseNotifier``: SMTP, Slack, a team's own) by dotted path,
with its constructor's arguments. The events:

* ``failed``: a process failed for good (its task's retries spent, or a failure retries cannot fix);
* ``failing-streak``: that failure makes ``failing-streak`` consecutive failed processes of the same
  (table, action) (then again at each multiple, so a table failing daily is not announced daily);
* ``suspended``: a dynamic table was suspended automatically after its failures (``suspend-after-failures``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

_DOTTED = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$"


class NotifyEvent(StrEnum):
    FAILED = "failed"
    FAILING_STREAK = "failing-streak"
    SUSPENDED = "suspended"


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=lambda n: n.replace("_", "-"), populate_by_name=True, extra="forbid", frozen=True
    )


class NotifierSpec(_Model):
    """One Airflow notifier: ``class`` (dotted path of a ``BaseNotifier``) and ``kwargs`` for it."""

    class_path: str = Field(
        alias="class",
        pattern=_DOTTED,
        description="dotted path of an Airflow notifier, e.g. airflow.providers.smtp.notifications.smtp.SmtpNotifier",
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="its constructor's arguments; templated fields may use {{ tablemgmt.subject }}, "
        "{{ tablemgmt.text }}, {{ tablemgmt.table }}, {{ tablemgmt.event }} ...",
    )


class NotifySpec(_Model):
    """Notifications of a table (``notify:``), or of every table (``[tablemgmt] notify``)."""

    notifiers: list[NotifierSpec] = Field(default_factory=list)
    # Not `on`: YAML 1.1 (PyYAML) reads the key `on` as the boolean true.
    events: list[NotifyEvent] = Field(
        default_factory=lambda: list(NotifyEvent), description="the events to notify (default: all)"
    )
    failing_streak: int = Field(
        default=3, ge=2, le=1000, description="consecutive failed processes that make a failing streak"
    )
    inherit: bool = Field(
        default=True, description="a table's notify: also use the notifiers of [tablemgmt] notify"
    )

    @field_validator("events")
    @classmethod
    def _unique(cls, v: list[NotifyEvent]) -> list[NotifyEvent]:
        return list(dict.fromkeys(v))
