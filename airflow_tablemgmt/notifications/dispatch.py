"""Resolve who is notified of what ([tablemgmt] notify + a table's notify:) and send through the notifiers."""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.notify import DEFAULT_HEALTH_BELOW, NotifierSpec, NotifyEvent, NotifySpec
from airflow_tablemgmt.notifications.events import Notification

log = logging.getLogger(__name__)
OPTION = ("tablemgmt", "notify")
# Where the message goes when the notifier's spec does not say: the fields of the notifiers teams use
# most. Any other notifier templates its own fields with {{ tablemgmt.subject }} / {{ tablemgmt.text }}.
DEFAULT_FIELDS: dict[str, dict[str, str]] = {
    "SmtpNotifier": {
        "subject": "{{ tablemgmt.subject }}",
        "html_content": "<pre>{{ tablemgmt.text | e }}</pre>",
    },
    "SlackNotifier": {"text": "{{ tablemgmt.text }}"},
    "SlackWebhookNotifier": {"text": "{{ tablemgmt.text }}"},
}


@dataclass(frozen=True)
class Route:
    """Notifiers, the events they take, the streak that counts as one and the health threshold (from one
    NotifySpec)."""

    notifiers: tuple[NotifierSpec, ...]
    events: frozenset[NotifyEvent]
    failing_streak: int
    health_below: int = DEFAULT_HEALTH_BELOW


def parse_notify(value: str | Mapping[str, Any] | None, source: str) -> NotifySpec | None:
    """A NotifySpec from ``[tablemgmt] notify`` (JSON) or a mapping; None when empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        raw = json.loads(value) if isinstance(value, str) else dict(value)
        return NotifySpec.model_validate(raw)
    except (ValueError, ValidationError) as e:
        raise InvalidDeclaration(f"{source}: {e}") from None


def global_notify() -> NotifySpec | None:
    from airflow.sdk.configuration import conf

    return parse_notify(conf.get(*OPTION, fallback=""), "[tablemgmt] notify")


def routes(table_notify: NotifySpec | None, global_spec: NotifySpec | None) -> list[Route]:
    """The table's own notifiers (with its events and streak), then the global ones unless it opted out."""
    specs = [s for s in (table_notify,) if s is not None]
    if global_spec is not None and (table_notify is None or table_notify.inherit):
        specs.append(global_spec)
    return [
        Route(tuple(s.notifiers), frozenset(s.events), s.failing_streak, s.health_below)
        for s in specs
        if s.notifiers
    ]


def build_notifier(spec: NotifierSpec) -> Any:
    from airflow.sdk import BaseNotifier

    module, _, name = spec.class_path.rpartition(".")
    cls = getattr(importlib.import_module(module), name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseNotifier)):
        raise InvalidDeclaration(f"notify: {spec.class_path} is not an Airflow notifier (BaseNotifier)")
    kwargs = {**DEFAULT_FIELDS.get(cls.__name__, {}), **spec.kwargs}
    return cls(**kwargs)


def send(notifiers: tuple[NotifierSpec, ...], notification: Notification, context: Mapping[str, Any]) -> int:
    """Send ``notification`` through each notifier; returns how many succeeded. A failing notifier is
    logged with its class and does not stop the others."""
    sent = 0
    for spec in notifiers:
        ctx = dict(context)
        ctx["tablemgmt"] = notification.template_context()
        try:
            build_notifier(spec)(ctx)
            sent += 1
        except Exception:  # noqa: BLE001 - one broken notifier must not silence the others
            log.exception("tablemgmt: notifier %s failed to send %s", spec.class_path, notification.subject)
    return sent


def send_routed(decided: Iterable[tuple[Route, Notification]], context: Mapping[str, Any]) -> None:
    """Send each decided notification through its route's notifiers, and say in the task's log how many took it."""
    for route, notification in decided:
        sent = send(route.notifiers, notification, context)
        log.info(
            "tablemgmt: %s sent through %d of %d notifier(s)",
            notification.subject,
            sent,
            len(route.notifiers),
        )
