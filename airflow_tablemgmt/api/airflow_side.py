"""What the API asks of Airflow itself: permissions on DAGs, DAG runs, and DAG scheduling state.

Runs inside Airflow's api-server, which owns the metadata DB (unlike task code).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from fastapi import Request

from airflow_tablemgmt.api.errors import ApiError
from airflow_tablemgmt.services.run_now import DuplicateRun


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
