"""The lifecycle's exceptions (the core ones it raises too, ``JobFailed`` and ``LeaseUnavailable``,
live in :mod:`airflow_tablemgmt.core.errors`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_tablemgmt.core.errors import JobFailed, TableMgmtError

if TYPE_CHECKING:
    from airflow_tablemgmt.core.process import Process


class ProcessCanceled(TableMgmtError):
    """The process was canceled (a cancel is final: no later try re-opens it)."""


class StoreUnreachable(JobFailed):
    """The metadata store failed mid-run; the message names it (host:port)."""


class WorkerSuperseded(JobFailed):
    """This worker no longer owns its process attempt or the table's lease: it killed its job and
    wrote nothing to a row that belongs to someone else now."""


def canceled(p: Process) -> ProcessCanceled:
    """The error a run of the canceled process ``p`` raises."""
    return ProcessCanceled(
        f"process {p.id} was canceled ({p.failure_reason or 'no reason given'}); a canceled process is "
        "never re-run: trigger a new run (another instant) to run the action again"
    )
