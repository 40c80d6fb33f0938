"""The Airflow plugin (``airflow.plugins`` entry point): the REST API and UI page at ``/tablemgmt``.

Two external views: "Table maintenance" in Airflow's navigation renders the page inside the Airflow
UI (an iframe on the same origin, so the page's requests carry Airflow's ``_token`` cookie), and one
on every DAG's page that opens the table page of a maintenance DAG (Airflow replaces ``{DAG_ID}``).

Every Airflow process loads plugins (scheduler, dag processor, each task), but only the api-server
serves the app, so only the api-server builds it: on a background thread as the api-server starts (from a
root middleware, which only the api-server instantiates), so that neither the page's first request nor the
api-server's event loop waits for it. Built on the first request instead, it made the first page after a
login wait several seconds (at load 25 most of a 17 s first overview) while every other request of the
api-server stalled behind it.
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

    def build_in_background(self) -> None:
        """Start building the app on a thread (the api-server's start); a request that comes first waits."""
        if self._app is None:
            threading.Thread(target=lambda: self.app, name="tablemgmt-app-build", daemon=True).start()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        app = self._app
        if app is None:  # still building: wait off the event loop, so Airflow's own requests go on
            import asyncio

            app = await asyncio.to_thread(lambda: self.app)
        await app(scope, receive, send)


APP = LazyTableMgmtApp()


class BuildTableMgmtAppEarly:
    """A pass-through root middleware whose construction (the api-server builds its middleware stack as it
    starts; no other Airflow process does) starts building :data:`APP` in the background."""

    def __init__(self, app: Any) -> None:
        self.app = app
        APP.build_in_background()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


class TableMgmtPlugin(AirflowPlugin):
    name = "tablemgmt"
    fastapi_apps = [{"app": APP, "url_prefix": PREFIX, "name": "Table maintenance"}]
    fastapi_root_middlewares = [
        {
            "middleware": BuildTableMgmtAppEarly,
            "args": [],
            "kwargs": {},
            "name": "Table maintenance: build early",
        }
    ]
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
