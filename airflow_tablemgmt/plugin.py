"""The Airflow plugin (``airflow.plugins`` entry point): the REST API and UI page at ``/tablemgmt``.

Two external views: "Table maintenance" in Airflow's navigation renders the page inside the Airflow
UI (an iframe on the same origin, so the page's requests carry Airflow's ``_token`` cookie), and one
on every DAG's page that opens the table page of a maintenance DAG (Airflow replaces ``{DAG_ID}``).
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_tablemgmt.api.app import PREFIX


def _app() -> Any:
    from airflow_tablemgmt.api.app import create_app

    return create_app()


class TableMgmtPlugin(AirflowPlugin):
    name = "tablemgmt"
    fastapi_apps = [{"app": _app(), "url_prefix": PREFIX, "name": "Table maintenance"}]
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
