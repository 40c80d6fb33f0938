"""A notification's content: what happened to which table, in words a person on call can act on."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_tablemgmt.core.notify import NotifyEvent


@dataclass(frozen=True)
class Notification:
    event: NotifyEvent
    table: str
    action: str
    dag_id: str | None = None
    run_id: str | None = None
    process_id: int | None = None
    attempt: int | None = None
    status: str | None = None
    reason: str | None = None
    streak: int = 0
    suspended_reason: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def subject(self) -> str:
        if self.event == NotifyEvent.SUSPENDED:
            return f"[tablemgmt] {self.table} suspended after {self.streak} failed refreshes"
        if self.event == NotifyEvent.FAILING_STREAK:
            return f"[tablemgmt] {self.table} {self.action}: {self.streak} failed processes in a row"
        return f"[tablemgmt] {self.table} {self.action} failed"

    @property
    def text(self) -> str:
        lines = [self.subject, ""]
        what = {
            NotifyEvent.FAILED: "The process failed and its task has no retry left.",
            NotifyEvent.FAILING_STREAK: f"The last {self.streak} processes of this action all failed.",
            NotifyEvent.SUSPENDED: "The dynamic table is SUSPENDED: scheduled refreshes skip until "
            f"`tablemgmt dt resume {self.table}`.",
        }[self.event]
        lines.append(what)
        rows = [
            ("table", self.table),
            ("action", self.action),
            ("process", self.process_id),
            ("attempt", self.attempt),
            ("status", self.status),
            ("failure", self.reason),
            ("consecutive failures", self.streak or None),
            ("suspended because", self.suspended_reason),
            ("DAG run", f"{self.dag_id} / {self.run_id}" if self.dag_id else None),
        ]
        lines += [f"{k}: {v}" for k, v in rows if v not in (None, "")]
        lines += [f"{k}: {v}" for k, v in sorted(self.figures.items())]
        if self.process_id is not None:
            lines += ["", f"tablemgmt process {self.process_id}   # the process, its summary and failure"]
        return "\n".join(lines)

    def template_context(self) -> dict[str, Any]:
        """What a notifier's templated fields see as ``{{ tablemgmt.* }}``."""
        return {**asdict(self), "event": str(self.event), "subject": self.subject, "text": self.text}
