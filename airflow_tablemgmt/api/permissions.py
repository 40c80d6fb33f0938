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
#: Airflow's longest DAG id (``dag.dag_id`` is a String(250)).
MAX_DAG_ID = 250


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
    dag_id: Annotated[list[str], Query(description=f"the DAGs to ask about (1 to {MAX_DAGS})")],
) -> PermissionsOut:
    """What the signed-in user may do to each ``dag_id``, as Airflow's auth manager answers."""
    from airflow_tablemgmt.api.errors import ApiError

    if not dag_id or len(dag_id) > MAX_DAGS:
        raise ApiError(422, "dag_id", f"dag_id: give 1 to {MAX_DAGS} DAG ids, got {len(dag_id)}")
    for d in dag_id:
        if not d or len(d) > MAX_DAG_ID or not d.isprintable():
            raise ApiError(
                422, "dag_id", f"dag_id: {d[:80]!r} is not a DAG id (1 to {MAX_DAG_ID} printable characters)"
            )
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
