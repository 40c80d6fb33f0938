"""The plugin as Airflow loads it: from the airflow.plugins entry point, with the REST app at
/tablemgmt and the two external views the UI page needs."""

from __future__ import annotations

from importlib.metadata import entry_points


def test_the_entry_point_names_the_plugin() -> None:
    (ep,) = [e for e in entry_points(group="airflow.plugins") if e.name == "tablemgmt"]
    plugin = ep.load()
    assert plugin.name == "tablemgmt"
    (app,) = plugin.fastapi_apps
    assert app["url_prefix"] == "/tablemgmt"
    views = {v["destination"]: v for v in plugin.external_views}
    assert views["nav"]["href"] == "/tablemgmt/ui/" and views["nav"]["url_route"]
    assert views["dag"]["href"] == "/tablemgmt/dag-link/{DAG_ID}"  # Airflow fills in {DAG_ID}
    assert views["nav"]["url_route"] != views["dag"]["url_route"]


def test_errors_map_to_status_and_field() -> None:
    from airflow_tablemgmt.api.errors import status_and_field
    from airflow_tablemgmt.core.errors import ProcessNotFound, TableManagedByCode, UnknownAction
    from airflow_tablemgmt.services.errors import InvalidInput

    assert status_and_field(TableManagedByCode("a.b.c")) == (409, "table_id")
    assert status_and_field(ProcessNotFound("no process 7")) == (404, "process_id")
    assert status_and_field(UnknownAction("x", ["rewrite-files"])) == (422, "action")
    assert status_and_field(InvalidInput("priority: must be >= 1, got 0")) == (422, "priority")
    assert status_and_field(InvalidInput("--limit: must be at least 1")) == (422, "limit")


def test_loading_the_plugin_does_not_build_the_app() -> None:
    """Schedulers and task processes load every plugin; only the api-server should pay for the app."""
    import subprocess
    import sys

    code = (
        "import sys, airflow_tablemgmt.plugin as p; "
        "assert 'airflow_tablemgmt.api.app' not in sys.modules, 'app module imported'; "
        "print(type(p.TableMgmtPlugin.fastapi_apps[0]['app']).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("LazyTableMgmtApp")


def test_the_api_server_builds_the_app_as_it_starts_not_on_the_first_request() -> None:
    """Built on the page's first request, the app held that request (and the api-server's event loop) for
    seconds after a login; the api-server now builds it in the background as it starts (issue 37, item 6)."""
    import subprocess
    import sys

    code = """
import time
from fastapi import FastAPI
from fastapi.testclient import TestClient
import airflow_tablemgmt.plugin as p

root = FastAPI()  # as Airflow's api-server integrates the plugin (api_fastapi/app.py: init_plugins)
for m in p.TableMgmtPlugin.fastapi_root_middlewares:
    root.add_middleware(m["middleware"], *m["args"], **m["kwargs"])
root.mount("/tablemgmt", p.TableMgmtPlugin.fastapi_apps[0]["app"])
with TestClient(root) as client:  # the server's start (its lifespan): no request reaches /tablemgmt
    deadline = time.monotonic() + 120
    while p.APP._app is None and time.monotonic() < deadline:
        time.sleep(0.2)
    print("built before any request:", p.APP._app is not None)
    print("page:", client.get("/tablemgmt/ui/").status_code)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "built before any request: True" in out.stdout and "page: 200" in out.stdout, out.stdout
