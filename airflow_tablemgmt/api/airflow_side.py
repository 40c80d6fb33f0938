"""What the API asks of Airflow itself: permissions on DAGs, DAG runs, and DAG scheduling state.

Runs inside Airflow's api-server, which owns the metadata DB (unlike task code).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from fastapi import Request

from airflow_tablemgmt.api.errors import ApiError
from airflow_tablemgmt.hooks import airflow_dags
from airflow_tablemgmt.hooks.errors import DagMissing, RunExists
from airflow_tablemgmt.services.run_now import DuplicateRun

log = logging.getLogger(__name__)


def authorize_dags(
    request: Request, user: object, method: str, dag_ids: Iterable[str | None], run: bool = False
) -> None:
    """Airflow's own ``requires_access_dag`` for each DAG a mutation affects (403 otherwise).

    ``None`` means every DAG (a catalog change, or a table with no action yet); ``run`` asks for the
    DAG-run permission (trigger, cancel) rather than the DAG's.
    """
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag

    entity = DagAccessEntity.RUN if run else None
    for dag_id in sorted(set(dag_ids), key=lambda d: d or "") or [None]:
        requires_access_dag(method, entity, param_dag_id=dag_id)(request, user)  # type: ignore[arg-type]


def trigger_run(
    dag_id: str, logical_date: datetime, user_name: str, conf: Mapping[str, Any] | None = None
) -> str:
    """A manual DAG run at ``logical_date``; its run id is derived from the instant, so a second
    request for the same instant is found as a duplicate (:class:`DuplicateRun`) instead of queued.
    ``conf``: the run's (a policy's planned DAG run naming its table, docs/planning.md)."""
    return _trigger(dag_id, logical_date, user_name, conf=conf, refresh=False)


def trigger_refresh_run(dag_id: str, logical_date: datetime, conf: Mapping[str, Any], user_name: str) -> str:
    """A dynamic table's refresh DAG run at ``logical_date`` (the refresh's schedule time) with ``conf``.

    Unlike :func:`trigger_run`, a run Airflow already has at that logical date — the scheduler's own
    periodic run, or an earlier request for the same schedule time — is the answer, not an error: the
    same periodic schedule time is one refresh (FLIP-435), so its run id is returned and nothing new
    is queued.
    """
    return _trigger(dag_id, logical_date, user_name, conf=conf, refresh=True)


def _trigger(
    dag_id: str, logical_date: datetime, user_name: str, conf: Mapping[str, Any] | None, refresh: bool
) -> str:
    """One trigger for both kinds of run; only the run id, the note and the error answers differ."""
    run_id = f"tablemgmt__{'refresh__' if refresh else ''}{logical_date.isoformat()}"
    field = "scheduleTime" if refresh else "instant"
    try:
        return airflow_dags.trigger_at(
            dag_id,
            logical_date,
            run_id=run_id,
            user_name=user_name,
            conf=conf,
            note=f"{'refresh' if refresh else 'run now'}, from /tablemgmt/v1",
        )
    except RunExists:
        existing = airflow_dags.existing_run_id(dag_id, logical_date) if refresh else None
        if existing is not None:
            return existing
        if refresh:  # a run with our run id at another logical date: cannot happen by construction
            raise DuplicateRun(
                f"scheduleTime: DAG {dag_id} already has run {run_id}; give another schedule time"
            ) from None
        raise DuplicateRun(
            f"instant: DAG {dag_id} already has a run at {logical_date.isoformat()}; give another instant"
        ) from None
    except DagMissing:
        what = "a new dynamic table's DAG" if refresh else "new tables' DAGs"
        field_404 = "table_id" if refresh else "action"
        raise ApiError(
            404,
            field_404,
            f"{field_404}: Airflow has no DAG {dag_id} yet; the dag processor parses {what} within "
            "[dag_processor] refresh_interval, try again then",
        ) from None
    except ValueError as e:  # e.g. a logical date before the DAG's start date
        raise ApiError(400 if refresh else 422, field, f"{field}: {e}") from None


# Airflow's DAG state, one copy for the CLI and the api-server (hooks/airflow_dags.py).
dag_states = airflow_dags.dag_states
existing_run_id = airflow_dags.existing_run_id
end_queued_run = airflow_dags.end_queued_run


def set_dag_paused(dag_id: str, paused: bool) -> None:
    """The REST side's pauser (suspend / resume a dynamic table): Airflow's own pause flag."""
    airflow_dags.set_dag_paused(dag_id, paused)


def spark_master(conn_id: str = "spark_default") -> str | None:
    """Where the refresh's Spark job goes: the master the job's hook resolves from ``conn_id``
    (``local[*]`` when the connection does not exist), for FLIP-435's ``clusterInfo``."""
    try:
        from airflow_tablemgmt.hooks.spark_job import _CapturingSparkSubmitHook

        return str(_CapturingSparkSubmitHook(conn_id=conn_id)._connection["master"])
    except Exception:  # clusterInfo is informative: never fail a submitted refresh over it
        log.warning("could not resolve the Spark master of connection %s", conn_id, exc_info=True)
        return None
