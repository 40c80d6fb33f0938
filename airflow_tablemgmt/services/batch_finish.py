"""A planned batch's job results completed after their jobs, in each table's own thread.

A submitter may leave on its result a call that completes it (:data:`FINISH_LATER`: the Connect engine's cost
read and figures after the action on a batch's kept session, ``spark/connect/finish_later.py``), so that the
batch's next job need not wait for it. The batch runs it before the lifecycle records the result: in the
table's thread while the next job runs (``batch_overlap.Handoff``), or right after the job when the batch runs
its tables one after another (:class:`Completes`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.spark.protocol import FINISH_LATER

if TYPE_CHECKING:
    from airflow_tablemgmt.core.factory import JobSpec
    from airflow_tablemgmt.spark.protocol import JobResult

log = logging.getLogger(__name__)


def finished(result: JobResult) -> JobResult:
    """``result`` completed by what its submitter left to do after the job (:data:`FINISH_LATER`); never
    raises (what is left is a figure, never the outcome)."""
    finish = getattr(result, FINISH_LATER, None)
    if finish is not None:
        delattr(result, FINISH_LATER)
        try:
            finish()
        except Exception:  # noqa: BLE001 - a figure never fails a table
            log.warning("tablemgmt: completing a job's result after the job failed", exc_info=True)
    return result


class Completes:
    """A table's submitter whose result is :func:`finished` before the lifecycle records it (a batch run
    one table after another); everything else is the submitter's own."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        return finished(self._inner.submit(job, on_started=on_started))

    def kill(self) -> None:
        self._inner.kill()


__all__ = ["Completes", "finished"]
