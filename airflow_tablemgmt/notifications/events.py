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
    # unhealthy: the score, the threshold it fell below, the findings (metadata/health.py's, each with
    # ``enabled``: whether the table runs that action) and the table's page
    health_score: int | None = None
    health_below: int | None = None
    findings: tuple[dict[str, Any], ...] = ()
    page: str | None = None

    @property
    def subject(self) -> str:
        if self.event == NotifyEvent.UNHEALTHY:
            return f"[tablemgmt] {self.table} health score {self.health_score} is below {self.health_below}"
        if self.event == NotifyEvent.SUSPENDED:
            return f"[tablemgmt] {self.table} suspended after {self.streak} failed refreshes"
        if self.event == NotifyEvent.FAILING_STREAK:
            return f"[tablemgmt] {self.table} {self.action}: {self.streak} failed processes in a row"
        return f"[tablemgmt] {self.table} {self.action} failed"

    @property
    def text(self) -> str:
        if self.event == NotifyEvent.UNHEALTHY:
            return self._unhealthy_text()
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

    def _unhealthy_text(self) -> str:
        after = f"its {self.action} process {self.process_id}" if self.process_id else f"its {self.action}"
        lines = [
            self.subject,
            "",
            f"The table's health score is {self.health_score} of 100, below {self.health_below}, measured after "
            f"{after} ended. You are told once: again only after it is back at {self.health_below} or more "
            "and falls again.",
            "",
            "What would help:" if self.findings else "No action would help (no finding).",
        ]
        for f in self.findings:
            note = "" if f.get("enabled") else " (not among the table's actions)"
            lines.append(f"- {f['action']}{note}, -{f['points']} points: {f['reason']}")
        rows = [("table", self.table), ("DAG run", f"{self.dag_id} / {self.run_id}" if self.dag_id else None)]
        lines += [""] + [f"{k}: {v}" for k, v in rows if v not in (None, "")]
        lines += ["", f"page: {self.page}"] if self.page else [""]
        lines.append(f"REST: GET /tablemgmt/v1/tables/{self.table}/health")
        for action in dict.fromkeys(f["action"] for f in self.findings if f.get("enabled")):
            lines.append(
                f"tablemgmt run {self.table} {action}   # run it now rather than at its next schedule"
            )
        return "\n".join(lines)

    def template_context(self) -> dict[str, Any]:
        """What a notifier's templated fields see as ``{{ tablemgmt.* }}``."""
        return {**asdict(self), "event": str(self.event), "subject": self.subject, "text": self.text}
