"""Why an enrolled table was not maintained (ADR 0004 decision 2): after a plan, one skipped process per table it
left out, only when the reason differs from the one the table's newest process of the action already gives
(``store/plan_skips.py``). A table stays out of a run when the action does not pay on its stored (or freshly
measured) health (``idle``: the health gate's own reason) or when its metadata could not be read
(``unmeasured``); a table waiting for the measure budget, or without the action enabled, gets nothing.

So 100,000 healthy tables write their rows once, when a plan first leaves them out, and then only the tables
whose reason moved (new figures after a measurement, a changed threshold, a process in between). At most
:data:`MAX_SKIPS_PER_RUN` rows a run, in table-id order; the rest are written by the next runs (their reason
still differs). Each row is a finished ``SUCCESS`` process with ``{"skipped": true, "gate": "plan", "reason":
...}`` at the DAG run's instant, recording the planning task's DAG run like a batch's processes do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from airflow_tablemgmt.store.plan_skips import PLAN_GATE, PlanSkipRepository

if TYPE_CHECKING:
    from airflow_tablemgmt.services.plan_runs import PlannedRun
    from airflow_tablemgmt.store import Store

#: Skipped processes one planning task writes at most (the first plan of 100,000 tables takes a few runs).
MAX_SKIPS_PER_RUN = 5000


@dataclass(frozen=True)
class SkipsRecorded:
    """What :func:`record_skips` did: rows ``written``, tables whose reason was ``unchanged``, and ``deferred``
    ones beyond :data:`MAX_SKIPS_PER_RUN` (the next run writes them)."""

    written: int
    unchanged: int
    deferred: int


def skip_reasons(planned: PlannedRun) -> dict[str, str]:
    """Table id -> why this run leaves it out, for the tables a skip is recorded for."""
    out = {t: f"not planned: {why}" for t, why in planned.plan.idle.items()}
    out.update(
        {t: f"not planned: its health could not be measured: {why}" for t, why in planned.unmeasured.items()}
    )
    return out


def record_skips(
    store: Store,
    policy: str,
    planned: PlannedRun,
    *,
    instant: datetime,
    dag_id: str | None,
    run_id: str | None,
    task_id: str,
    limit: int = MAX_SKIPS_PER_RUN,
) -> SkipsRecorded:
    """Write the skipped processes of ``planned`` whose reason changed (see the module docstring)."""
    reasons = skip_reasons(planned)
    if not reasons:
        return SkipsRecorded(0, 0, 0)
    repo = PlanSkipRepository.of(store)
    last = repo.last_reasons(policy, planned.plan.action, task_id)
    changed = sorted((t, r) for t, r in reasons.items() if last.get(t) != r)
    parameters = {"plan": {"policy": policy, "dag_id": dag_id, "run_id": run_id, "task_id": task_id}}
    written = repo.record(
        changed[:limit],
        action=planned.plan.action,
        instant=instant,
        parameters=parameters,
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
    )
    return SkipsRecorded(len(written), len(reasons) - len(changed), max(0, len(changed) - limit))


__all__ = ["MAX_SKIPS_PER_RUN", "PLAN_GATE", "SkipsRecorded", "record_skips", "skip_reasons"]
