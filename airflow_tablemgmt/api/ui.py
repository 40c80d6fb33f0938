"""The "Table maintenance" page: static files from the package's ``ui/`` folder, served under ``<prefix>/ui/``.

The REST app includes :data:`router`, so the page inherits the app's authentication (Airflow's ``_token``
cookie, which the browser sends because the page is same-origin with the Airflow UI that frames it). The
files are plain HTML/CSS/JS shipped as package data: nothing is fetched from a CDN and nothing is built.
Only the names in :data:`ASSETS` are served, so no request path ever reaches the file system.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, HTTPException
from fastapi.responses import RedirectResponse, Response

ASSETS: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}

# The page is small and changes with the package version; revalidating each load keeps an upgraded
# provider from running yesterday's script against today's API.
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}

router = APIRouter(include_in_schema=False)


def _asset(name: str) -> Response:
    if name not in ASSETS:
        raise HTTPException(
            status_code=404, detail=f"ui asset {name!r} does not exist; the page serves {sorted(ASSETS)}"
        )
    body = resources.files("airflow_tablemgmt").joinpath("ui", name).read_bytes()
    return Response(content=body, media_type=ASSETS[name], headers=_HEADERS)


@router.get("/ui")
def ui_redirect() -> RedirectResponse:
    # Relative, so it stays right whatever prefix the app is mounted at.
    return RedirectResponse(url="ui/", status_code=307)


@router.get("/ui/")
def ui_index() -> Response:
    return _asset("index.html")


@router.get("/ui/{name}")
def ui_asset(name: str) -> Response:
    return _asset(name)
