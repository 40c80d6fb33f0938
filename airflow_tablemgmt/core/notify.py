"""Who is told what: the ``notify:`` of a table declaration and ``[tablemgmt] notify`` (the same document).

A notifier is any Airflow notifier class (``BaseNotifier``: SMTP, Slack, a team's own) by dotted path,
with its constructor's arguments. The events:

* ``failed``: a process failed for good (its task's retries spent, or a failure retries cannot fix);
* ``failing-streak``: that failure makes ``failing-streak`` consecutive failed processes of the same
  (table, action) (then again at each multiple, so a table failing daily is not announced daily);
* ``suspended``: a dynamic table was suspended automatically after its failures (``suspend-after-failures``);
* ``unhealthy``: the table's health score (``metadata/health.py``, 0–100) fell below ``health-below``
  (default :data:`DEFAULT_HEALTH_BELOW`) when measured after one of its processes: once per crossing,
  again only after it has recovered to ``health-below`` or more and fallen again
  (``notifications/health.py``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: The score under which a table counts as unhealthy when ``health-below`` is not set: half the points
#: lost, e.g. a table whose data files are mostly small (up to 40) with expirable snapshots besides.
DEFAULT_HEALTH_BELOW = 50
_DOTTED = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$"


class NotifyEvent(StrEnum):
    FAILED = "failed"
    FAILING_STREAK = "failing-streak"
    SUSPENDED = "suspended"
    UNHEALTHY = "unhealthy"


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
    health_below: int = Field(
        default=DEFAULT_HEALTH_BELOW,
        ge=1,
        le=100,
        description="unhealthy: a health score (0-100) under this value is a crossing, notified once until "
        "the score is back at this value or more",
    )
    inherit: bool = Field(
        default=True, description="a table's notify: also use the notifiers of [tablemgmt] notify"
    )

    @field_validator("events")
    @classmethod
    def _unique(cls, v: list[NotifyEvent]) -> list[NotifyEvent]:
        return list(dict.fromkeys(v))
