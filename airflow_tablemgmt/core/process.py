"""Processes: one run of one action on one table at one instant, and its legal lifecycle."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from airflow_tablemgmt.core.errors import IllegalTransition


class ProcessStatus(StrEnum):
    """Status of a process (after Amoro's ProcessStatus)."""

    PENDING = "PENDING"
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    KILLED = "KILLED"
    CANCELING = "CANCELING"
    CANCELED = "CANCELED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset(
    {ProcessStatus.SUCCESS, ProcessStatus.FAILED, ProcessStatus.KILLED, ProcessStatus.CANCELED}
)
ACTIVE = frozenset(
    {ProcessStatus.PENDING, ProcessStatus.SUBMITTED, ProcessStatus.RUNNING, ProcessStatus.CANCELING}
)

_S = ProcessStatus
LEGAL_TRANSITIONS: dict[ProcessStatus, frozenset[ProcessStatus]] = {
    _S.PENDING: frozenset({_S.SUBMITTED, _S.FAILED, _S.CANCELING, _S.CANCELED}),
    _S.SUBMITTED: frozenset({_S.RUNNING, _S.FAILED, _S.KILLED, _S.CANCELING}),
    _S.RUNNING: frozenset({_S.SUCCESS, _S.FAILED, _S.KILLED, _S.CANCELING}),
    # A cancel that arrives after the job committed ends SUCCESS: the table did change.
    _S.CANCELING: frozenset({_S.CANCELED, _S.FAILED, _S.KILLED, _S.SUCCESS}),
    # A retry re-opens a failed or killed process as a new attempt. A cancel is final: no later
    # try of the task re-opens a CANCELED process.
    _S.FAILED: frozenset({_S.PENDING}),
    _S.KILLED: frozenset({_S.PENDING}),
    _S.CANCELED: frozenset(),
    _S.SUCCESS: frozenset(),
}


def can_transition(current: ProcessStatus, target: ProcessStatus) -> bool:
    return target in LEGAL_TRANSITIONS[current]


def check_transition(current: ProcessStatus, target: ProcessStatus) -> None:
    """Raise :class:`IllegalTransition` unless ``current -> target`` is legal."""
    if not can_transition(current, target):
        allowed = ", ".join(sorted(LEGAL_TRANSITIONS[current])) or "none (terminal)"
        raise IllegalTransition(
            f"process cannot go from {current} to {target}; allowed from {current}: {allowed}"
        )


@dataclass
class Process:
    """A process as the store records it."""

    id: int
    table_id: str
    action: str
    instant: datetime
    status: ProcessStatus
    attempt: int = 1
    engine: str = "spark"
    external_id: str | None = None
    snapshot_id: int | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    failure_reason: str | None = None
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    heartbeat_at: datetime | None = None
    #: The heartbeat interval (seconds) the worker running this attempt promised; the reaper judges
    #: the row by it (:func:`core.timing.stale_bound`).
    heartbeat_every_s: float | None = None
    #: When this attempt took the table's lease (None: not yet, or an action that takes none).
    lease_acquired_at: datetime | None = None
    #: What the run cost (``core/cost.py``): executor core-seconds, CPU seconds, bytes read and written;
    #: None when nothing measured it.
    core_seconds: float | None = None
    cpu_seconds: float | None = None
    bytes_read: int | None = None
    bytes_written: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            out[k] = v.isoformat() if isinstance(v, datetime) else (str(v) if isinstance(v, StrEnum) else v)
        return out
