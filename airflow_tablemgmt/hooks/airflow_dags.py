"""Airflow's own DAG state, through its metadata DB: the pause flag, DAG states, DAG runs at an instant.

One copy for the two fronts that run beside Airflow and own access to its DB: the ``tablemgmt``
command and the REST API inside the api-server. Never for task code (Airflow 3's tasks reach the DB
only through the execution API). Every import of Airflow is inside a function: importing this module
costs nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from airflow_tablemgmt.hooks.errors import DagMissing, RunExists

log = logging.getLogger(__name__)


def set_dag_paused(dag_id: str, paused: bool) -> bool:
    """Airflow's own pause flag on ``dag_id`` (what ``airflow dags pause`` and ``PATCH
    /api/v2/dags/{dag_id}`` set). False, with a warning, when Airflow has no such DAG yet: the
    caller's own state (a SUSPENDED table in the store) is the source of truth, and the refresh task
    skips the scheduled runs of a SUSPENDED table."""
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
    return bool(changed)


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


def trigger_at(
    dag_id: str,
    logical_date: datetime,
    *,
    run_id: str,
    user_name: str,
    note: str,
    conf: Mapping[str, Any] | None = None,
) -> str:
    """A manual DAG run of ``dag_id`` at ``logical_date`` with ``run_id``, triggered over REST by
    ``user_name``. Raises :class:`RunExists` (that run id or logical date is taken),
    :class:`DagMissing`, or ``ValueError`` (e.g. a logical date before the DAG's start date)."""
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.exceptions import DagNotFound, DagRunAlreadyExists
    from airflow.utils.types import DagRunTriggeredByType
    from sqlalchemy.exc import IntegrityError

    try:
        run = trigger_dag(
            dag_id,
            triggered_by=DagRunTriggeredByType.REST_API,
            triggering_user_name=user_name,
            run_id=run_id,
            conf=dict(conf) if conf is not None else None,
            logical_date=logical_date,
            note=note,
        )
    except (DagRunAlreadyExists, IntegrityError):
        raise RunExists(run_id) from None
    except DagNotFound:
        raise DagMissing(dag_id) from None
    return run.run_id if run is not None else run_id


def existing_run_id(dag_id: str, logical_date: datetime) -> str | None:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return session.scalar(
            select(DagRun.run_id).where(DagRun.dag_id == dag_id, DagRun.logical_date == logical_date)
        )


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
