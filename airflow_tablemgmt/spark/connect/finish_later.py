"""What a Connect job's result still needs once the job has returned: its cost from the server's status API
(``cost.py``) and, on a planned batch's kept session, the figures after the action the job left to read
(``spark/job/after_later.py``).

On a batch's kept session that defers them (``KeptSession.defer_cost``) both are left on the result as one
call, :data:`FINISH_LATER`, which the batch runs in the table's own thread while the next table's job runs
(``services/batch_overlap.py``'s ``finished``), before the lifecycle records the result. Elsewhere the cost
is read at once.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from airflow_tablemgmt.spark.protocol import FINISH_LATER

if TYPE_CHECKING:
    from airflow_tablemgmt.spark.connect.kept import KeptSession
    from airflow_tablemgmt.spark.job.after_later import LaterRead
    from airflow_tablemgmt.spark.protocol import JobResult


class MeasuredRun(Protocol):
    """What the cost read needs of a job's run (``session.ConnectRun``)."""

    url: str
    session_id: str
    tag: str
    timings: dict[str, float]
    kept: KeptSession | None

    @property
    def stopped(self) -> bool: ...


def measure(run: MeasuredRun, session: Any, result: JobResult) -> None:
    """The job's cost from the server's status API (``cost.py``), into its result: a success's
    ``summary["cost"]``, a failure's ``cost``; a run stopped by a kill is not measured (it must end now).
    On a batch's kept session that defers it (``KeptSession.defer_cost``) the status API is read by
    :data:`FINISH_LATER`, in the table's own thread while the next table's job runs."""
    if run.stopped:
        return
    from airflow_tablemgmt.spark.connect.cost import cost_reader

    started = time.perf_counter()
    facts = run.kept.facts if run.kept is not None else None
    later = run.kept is not None and run.kept.defer_cost
    read = cost_reader(session, run.url, run.session_id, run.tag, facts=facts, later=later)
    run.timings["cost"] = round(time.perf_counter() - started, 3)
    if read is None:
        return

    def finish() -> None:
        began = time.perf_counter()
        cost = read()
        spent = round(time.perf_counter() - began, 3)
        if isinstance(result.summary, dict) and isinstance(result.summary.get("timings"), dict):
            result.summary["timings"]["cost"] = round(result.summary["timings"].get("cost", 0.0) + spent, 3)
            result.summary["timings"]["cost_after_job"] = spent
        if cost is None:
            return
        if result.ok:
            result.summary["cost"] = cost
        else:
            result.raw["cost"] = cost

    if later:
        setattr(result, FINISH_LATER, finish)  # noqa: B010 - JobResult has no field for it
        return
    finish()
    run.timings["cost"] = round(time.perf_counter() - started, 3)


def read_after_later(result: JobResult, reads: list[LaterRead]) -> None:
    """The figures the job left to read after it (``spark/job/after_later.py``), read by :data:`FINISH_LATER`
    before the job's cost; not on a failed result (it has no figures after)."""
    if not reads or not result.ok or not isinstance(result.summary, dict):
        return
    from airflow_tablemgmt.spark.job.after_later import fill
    from airflow_tablemgmt.spark.job.metrics import METRIC_KEYS

    summary, then = result.summary, getattr(result, FINISH_LATER, None)

    def finish() -> None:
        spent = round(fill(summary, reads, METRIC_KEYS), 3)
        timings = summary.get("timings")
        if isinstance(timings, dict):
            timings["metrics_after"] = round(timings.get("metrics_after", 0.0) + spent, 3)
            timings["metrics_after_job"] = spent
        if then is not None:
            then()

    setattr(result, FINISH_LATER, finish)  # noqa: B010 - JobResult has no field for it


__all__ = ["MeasuredRun", "measure", "read_after_later"]
