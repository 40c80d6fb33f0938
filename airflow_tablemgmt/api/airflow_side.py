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


def trigger_run(dag_id: str, logical_date: datetime, user_name: str) -> str:
    """A manual DAG run at ``logical_date``; its run id is derived from the instant, so a second
    request for the same instant is found as a duplicate (:class:`DuplicateRun`) instead of queued."""
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.exceptions import DagNotFound, DagRunAlreadyExists
    from airflow.utils.types import DagRunTriggeredByType
    from sqlalchemy.exc import IntegrityError

    run_id = f"tablemgmt__{logical_date.isoformat()}"
    try:
        run = trigger_dag(
            dag_id,
            triggered_by=DagRunTriggeredByType.REST_API,
            triggering_user_name=user_name,
            run_id=run_id,
            logical_date=logical_date,
            note="run now, from /tablemgmt/v1",
        )
    except (DagRunAlreadyExists, IntegrityError):
        raise DuplicateRun(
            f"instant: DAG {dag_id} already has a run at {logical_date.isoformat()}; give another instant"
        ) from None
    except DagNotFound:
        raise ApiError(
            404,
            "action",
            f"action: Airflow has no DAG {dag_id} yet; the dag processor parses new tables' DAGs within "
            "[dag_processor] refresh_interval, try again then",
        ) from None
    except ValueError as e:  # e.g. a logical date before the DAG's start date
        raise ApiError(422, "instant", f"instant: {e}") from None
    return run.run_id if run is not None else run_id


def dag_states(dag_ids: Iterable[str]) -> dict[str, tuple[bool, datetime | None]]:
    """dag_id -> (paused, next run) for the DAGs Airflow knows."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    ids = list(dag_ids)
    if not ids:
        return {}
    with create_session() as session:
        rows = session.execute(
            select(DagModel.dag_id, DagModel.is_paused, DagModel.next_dagrun_create_after).where(
                DagModel.dag_id.in_(ids)
            )
        ).all()
    return {r[0]: (bool(r[1]), r[2]) for r in rows}


def trigger_refresh_run(dag_id: str, logical_date: datetime, conf: Mapping[str, Any], user_name: str) -> str:
    """A dynamic table's refresh DAG run at ``logical_date`` (the refresh's schedule time) with ``conf``.

    Unlike :func:`trigger_run`, a run Airflow already has at that logical date — the scheduler's own
    periodic run, or an earlier request for the same schedule time — is the answer, not an error: the
    same periodic schedule time is one refresh (FLIP-435), so its run id is returned and nothing new
    is queued.
    """
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.exceptions import DagNotFound, DagRunAlreadyExists
    from airflow.utils.types import DagRunTriggeredByType
    from sqlalchemy.exc import IntegrityError

    run_id = f"tablemgmt__refresh__{logical_date.isoformat()}"
    try:
        run = trigger_dag(
            dag_id,
            triggered_by=DagRunTriggeredByType.REST_API,
            triggering_user_name=user_name,
            run_id=run_id,
            conf=dict(conf),
            logical_date=logical_date,
            note="refresh, from /tablemgmt/v1",
        )
    except (DagRunAlreadyExists, IntegrityError):
        existing = existing_run_id(dag_id, logical_date)
        if existing is None:  # a run with our run id at another logical date: cannot happen by construction
            raise DuplicateRun(
                f"scheduleTime: DAG {dag_id} already has run {run_id}; give another schedule time"
            ) from None
        return existing
    except DagNotFound:
        raise ApiError(
            404,
            "table_id",
            f"table_id: Airflow has no DAG {dag_id} yet; the dag processor parses a new dynamic table's "
            "DAG within [dag_processor] refresh_interval, try again then",
        ) from None
    except ValueError as e:  # e.g. a logical date before the DAG's start date
        raise ApiError(400, "scheduleTime", f"scheduleTime: {e}") from None
    return run.run_id if run is not None else run_id


def existing_run_id(dag_id: str, logical_date: datetime) -> str | None:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return session.scalar(
            select(DagRun.run_id).where(DagRun.dag_id == dag_id, DagRun.logical_date == logical_date)
        )


def set_dag_paused(dag_id: str, paused: bool) -> None:
    """The REST side's pauser (suspend / resume a dynamic table): Airflow's own pause flag, as
    ``PATCH /api/v2/dags/{dag_id}`` sets it. A DAG the dag processor has not parsed yet has no flag to
    set: only a warning; the table's state in the store still changes, and the refresh task skips the
    scheduled runs of a SUSPENDED table."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import update

    with create_session() as session:
        result: Any = session.execute(
            update(DagModel).where(DagModel.dag_id == dag_id).values(is_paused=paused)
        )
        changed = result.rowcount
    if not changed:
        log.warning("Airflow has no DAG %s yet: nothing to %s", dag_id, "pause" if paused else "unpause")


def spark_master(conn_id: str = "spark_default") -> str | None:
    """Where the refresh's Spark job goes: the master the job's hook resolves from ``conn_id``
    (``local[*]`` when the connection does not exist), for FLIP-435's ``clusterInfo``."""
    try:
        from airflow_tablemgmt.hooks.spark_job import _CapturingSparkSubmitHook

        return str(_CapturingSparkSubmitHook(conn_id=conn_id)._connection["master"])
    except Exception:  # clusterInfo is informative: never fail a submitted refresh over it
        log.warning("could not resolve the Spark master of connection %s", conn_id, exc_info=True)
        return None


def end_queued_run(dag_id: str, run_id: str) -> bool:
    """Mark the DAG run ``run_id`` failed if it is still queued (a canceled process's run that never
    started: left queued, it would hold the DAG's one active run and keep every later run waiting).
    A run already started is left to its task, which stops at the process's cancel. True if ended."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from sqlalchemy import update

    with create_session() as session:
        ended = session.execute(
            update(DagRun)
            .where(DagRun.dag_id == dag_id, DagRun.run_id == run_id, DagRun.state == DagRunState.QUEUED)
            .values(state=DagRunState.FAILED)
            .execution_options(synchronize_session=False)
        )
        return bool(getattr(ended, "rowcount", 0))
