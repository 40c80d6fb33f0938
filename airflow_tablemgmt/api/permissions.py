"""``/permissions``: what the signed-in user may do to some DAGs, so the page can disable the buttons a
user cannot use (with a tooltip saying why) instead of letting them click and meet a 403.

The answer is Airflow's own auth manager, asked the same questions the mutations ask
(``api/airflow_side.authorize_dags``): Run now and a refresh need POST on the DAG's runs, Cancel needs
PUT on them, Pause / Resume and Suspend / Resume need PUT on the DAG. It is advice for the page only:
every mutation still checks for itself.
"""

from __future__ import annotations

from typing import Annotated

from airflow.api_fastapi.core_api.security import get_user
from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

router = APIRouter(tags=["tables"])

#: At most this many DAGs per request (a table's actions, a dynamic table's refresh DAG).
MAX_DAGS = 100


class DagPermissions(BaseModel):
    run: bool = Field(description="may trigger a run (Run now, a refresh): POST on the DAG's runs")
    cancel: bool = Field(description="may cancel a run's process: PUT on the DAG's runs")
    edit: bool = Field(description="may pause / resume the DAG (and suspend / resume a dynamic table): PUT")


class PermissionsOut(BaseModel):
    user: str
    dags: dict[str, DagPermissions]


@router.get("/permissions", response_model=PermissionsOut)
def get_permissions(
    user: Annotated[object, Depends(get_user)],
    dag_id: Annotated[list[str], Query(max_length=MAX_DAGS, description="the DAGs to ask about")],
) -> PermissionsOut:
    """What the signed-in user may do to each ``dag_id``, as Airflow's auth manager answers."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.models.dag import DagModel

    from airflow_tablemgmt.api.deps import user_name

    manager = get_auth_manager()

    def may(method: str, dag: str, run: bool) -> bool:
        return bool(
            manager.is_authorized_dag(
                method=method,  # type: ignore[arg-type]
                access_entity=DagAccessEntity.RUN if run else None,
                details=DagDetails(id=dag, team_name=DagModel.get_team_name(dag)),
                user=user,  # type: ignore[arg-type]
            )
        )

    dags = {
        d: DagPermissions(run=may("POST", d, True), cancel=may("PUT", d, True), edit=may("PUT", d, False))
        for d in dict.fromkeys(dag_id)
    }
    return PermissionsOut(user=user_name(user), dags=dags)
