"""A run's cost from Spark's own task metrics: the stages of the run's jobs, summed (``core/cost.py``
says what each figure means).

Spark keeps every job and stage of an application, with their tasks' metrics summed per stage attempt, in
its status store (``AppStatusStore``), which exists whether or not the web UI is on: the UI only serves it
(``/api/v1/applications/<id>/stages``). Both ways a run reaches it hand the same JSON documents
(``StageData``, ``JobData``) to :func:`stage_cost`:

* spark-submit: the driver reads its own store through py4j (``spark/job/cost.py``), after Spark's
  listener bus has delivered every task's end to it;
* Spark Connect: the server's store, through its UI's REST API, the jobs whose ``jobTags`` carry the
  run's operation tag (``spark/connect/cost.py``).

No pyspark here: the worker and the tests use it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: ``StageData`` fields summed, and the name each gets in a run's ``cost``.
STAGE_FIELDS = {
    "executorRunTime": "run_ms",
    "executorCpuTime": "cpu_ns",
    "inputBytes": "bytes_read",
    "outputBytes": "bytes_written",
    "shuffleReadBytes": "shuffle_read_bytes",
    "shuffleWriteBytes": "shuffle_write_bytes",
    "numCompleteTasks": "tasks",
    "numFailedTasks": "failed_tasks",
    "numKilledTasks": "killed_tasks",
}
#: A stage that never ran (its output was already there): nothing to count.
_NOT_RUN = ("SKIPPED", "PENDING")


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else 0


def stage_cost(
    stages: Iterable[Mapping[str, Any]], *, jobs: int | None = None, scope: str, source: str
) -> dict[str, Any]:
    """The cost document of a run whose stages (every attempt: a retried stage cost its failed attempt
    too) are ``stages``: ``core/cost.py``'s columns plus the detail (``COST_DETAIL``). A stage attempt
    listed twice (by two jobs) counts once."""
    totals = dict.fromkeys(STAGE_FIELDS.values(), 0)
    seen: set[tuple[Any, Any]] = set()
    for stage in stages:
        key = (stage.get("stageId"), stage.get("attemptId"))
        if key in seen or str(stage.get("status", "")).upper() in _NOT_RUN:
            continue
        seen.add(key)
        for field, name in STAGE_FIELDS.items():
            totals[name] += _int(stage.get(field))
    return {
        "core_seconds": round(totals["run_ms"] / 1000, 3),
        "cpu_seconds": round(totals["cpu_ns"] / 1e9, 3),
        "bytes_read": totals["bytes_read"],
        "bytes_written": totals["bytes_written"],
        "shuffle_read_bytes": totals["shuffle_read_bytes"],
        "shuffle_write_bytes": totals["shuffle_write_bytes"],
        "tasks": totals["tasks"],
        "failed_tasks": totals["failed_tasks"] + totals["killed_tasks"],
        "stages": len(seen),
        "jobs": jobs,
        "scope": scope,
        "source": source,
    }


def tagged_jobs(jobs: Iterable[Mapping[str, Any]], tag_suffix: str) -> list[Mapping[str, Any]]:
    """The jobs one of whose ``jobTags`` is ``tag_suffix`` or ends with ``_`` + it (Spark Connect prefixes a
    client's tag with its user and session: ``SparkConnect_SessionTag_User_<u>_Session_<s>_Tag_<tag>``)."""
    out = []
    for job in jobs:
        tags = job.get("jobTags") or []
        if any(str(t) == tag_suffix or str(t).endswith(f"_{tag_suffix}") for t in tags):
            out.append(job)
    return out


def stage_ids(jobs: Iterable[Mapping[str, Any]]) -> set[int]:
    """Every stage id the jobs list (skipped ones included; :func:`stage_cost` passes over those)."""
    return {int(s) for job in jobs for s in (job.get("stageIds") or [])}


def unfinished(jobs: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The ids of jobs the store still has running (their last tasks' metrics may not be summed yet)."""
    return [job.get("jobId") for job in jobs if str(job.get("status", "")).upper() in ("RUNNING", "UNKNOWN")]
