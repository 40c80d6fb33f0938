"""The Airflow plugin (``airflow.plugins`` entry point): the REST API and UI page at ``/tablemgmt``.

Two external views: "Table maintenance" in Airflow's navigation renders the page inside the Airflow
UI (an iframe on the same origin, so the page's requests carry Airflow's ``_token`` cookie), and one
on every DAG's page that opens the table page of a maintenance DAG (Airflow replaces ``{DAG_ID}``).

Every Airflow process loads plugins (scheduler, dag processor, each task), but only the api-server
serves the app: it is built on its first request, so the others do not pay for importing it.
"""

from __future__ import annotations

import threading
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_tablemgmt.api import PREFIX


class LazyTableMgmtApp:
    """An ASGI app that builds ``airflow_tablemgmt.api.app.create_app()`` when first called."""

    def __init__(self) -> None:
        self._app: Any = None
        self._lock = threading.Lock()

    @property
    def app(self) -> Any:
        if self._app is None:
            with self._lock:
                if self._app is None:
                    from airflow_tablemgmt.api.app import create_app

                    self._app = create_app()
        return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


class TableMgmtPlugin(AirflowPlugin):
    name = "tablemgmt"
    fastapi_apps = [{"app": LazyTableMgmtApp(), "url_prefix": PREFIX, "name": "Table maintenance"}]
    external_views = [
        {
            "name": "Table maintenance",
            "href": f"{PREFIX}/ui/",
            "url_route": "tablemgmt",
            "destination": "nav",
            "category": "browse",
        },
        {
            "name": "Table maintenance",
            "href": PREFIX + "/dag-link/{DAG_ID}",
            "url_route": "tablemgmt-dag",
            "destination": "dag",
        },
    ]
