"""The FastAPI app the plugin mounts at ``/tablemgmt``.

``/tablemgmt/v1`` is the REST API: a sub-app whose every route depends on Airflow's ``get_user``
(plugin apps are not authenticated by Airflow otherwise), so a request needs a valid Airflow JWT as a
Bearer token or as the UI's ``_token`` cookie; mutations also check Airflow's DAG permissions. The
UI page's router (``airflow_tablemgmt.api.ui``) is included beside it, at the root of the app.
"""

from __future__ import annotations

from airflow.api_fastapi.common.exceptions import init_error_handlers
from airflow.api_fastapi.core_api.security import get_user
from fastapi import Depends, FastAPI
from fastapi.responses import RedirectResponse

from airflow_tablemgmt.api import PREFIX
from airflow_tablemgmt.api.db_errors import install_db_error_handlers
from airflow_tablemgmt.api.errors import install_error_handlers
from airflow_tablemgmt.api.limits import BodyLimits
from airflow_tablemgmt.api.schemas import ErrorOut, NotFoundOut

API_VERSION_PATH = "/v1"


def create_api_app() -> FastAPI:
    from airflow_tablemgmt.api import (
        catalogs,
        cost,
        dynamic,
        enrolment,
        overview,
        permissions,
        policies,
        processes,
        tables,
    )

    api = FastAPI(
        title="Table maintenance API",
        version="1",
        description=(
            "Tables, their maintenance actions, processes and health; dynamic tables and their "
            "FLIP-435 refresh (airflow-tablemgmt)."
        ),
        dependencies=[Depends(get_user)],
        # Every operation may answer these, all as {"detail", "field"} (api/errors.py, api/limits.py); a
        # 404 of a path Airflow does not route here has no field (NotFoundOut).
        responses={
            **{status: {"model": ErrorOut} for status in (400, 401, 403, 409, 413, 415, 422, 503)},
            404: {"model": NotFoundOut},
        },
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
    )
    init_error_handlers(api)  # Airflow's handlers for its own DB errors
    install_error_handlers(api)  # ours after: every 4xx is {"detail", "field"}
    install_db_error_handlers(api)  # a value the database refuses (NUL, too long) is a 422
    for module in (catalogs, tables, processes, cost, dynamic, enrolment, policies, overview, permissions):
        api.include_router(module.router)
    api.add_middleware(BodyLimits)  # JSON bodies only (415), at most 1 MiB (413)
    return api


def create_app() -> FastAPI:
    app = FastAPI(title="Table maintenance", openapi_url=None, docs_url=None, redoc_url=None)
    install_error_handlers(app)  # a path no route matches is a JSON 404 here too
    try:  # the UI page's routes, when the package ships them
        from airflow_tablemgmt.api.ui import router as ui_router
    except ImportError:
        pass
    else:
        app.include_router(ui_router)

    @app.get("/dag-link/{dag_id}", include_in_schema=False)
    def dag_link(dag_id: str) -> RedirectResponse:
        """The DAG page's "Table maintenance" view: the page opens a maintenance DAG's table at that
        action (a refresh DAG's dynamic table), and says so for any other DAG rather than bouncing."""
        from urllib.parse import quote

        from airflow_tablemgmt.core.naming import parse_dag_id

        parsed = parse_dag_id(dag_id)
        if parsed is None:
            view = f"dags/{quote(dag_id, safe='')}"
        elif parsed[1] == "refresh":
            view = f"dynamic/{quote(parsed[0], safe='.')}"
        else:
            view = f"tables/{quote(parsed[0], safe='.')}?tab=maintenance&action={quote(parsed[1])}"
        return RedirectResponse(f"{PREFIX}/ui/#/{view}", status_code=307)

    app.mount(API_VERSION_PATH, create_api_app())
    return app
