"""Every error the API answers is JSON ``{"detail": <message>, "field": <what was wrong>}``.

Service errors carry messages that already name the field, the value and what is allowed (the CLI
prints the same text); this module only picks the status code and the ``field`` for each kind.
Request validation errors (FastAPI/pydantic) get the same shape, with ``errors`` listing every one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from airflow_tablemgmt.core.errors import (
    CatalogNotFound,
    CatalogUnavailable,
    IllegalTransition,
    InvalidDeclaration,
    ProcessNotFound,
    TableManagedByCode,
    TableMgmtError,
    TableNotFound,
    UnknownAction,
    UnreadableCatalog,
    UnreadableTable,
)
from airflow_tablemgmt.core.policies import PolicyNotFound
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.services.errors import CatalogConflict, Conflict, DeclarationsRejected, NotFound
from airflow_tablemgmt.services.run_now import DuplicateRun
from airflow_tablemgmt.store.dynamic import DynamicStateChanged, NotADynamicTable
from airflow_tablemgmt.store.errors import (
    CatalogInUse,
    CatalogManagedByCode,
    StoreUnavailable,
    TableManagedByPolicy,
    TableManagedByStore,
)
from airflow_tablemgmt.store.policies import PolicyManagedByCode


class ApiError(Exception):
    """An error the API layer itself raises (e.g. a DAG Airflow does not know)."""

    def __init__(self, status: int, field: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.field = field
        self.detail = detail


# (exception class, HTTP status, field when the message does not start with one); first match wins.
_MAPPING: list[tuple[type[Exception], int, str]] = [
    (TableNotFound, 404, "table_id"),
    (CatalogNotFound, 404, "catalog"),
    (PolicyNotFound, 404, "name"),
    (ProcessNotFound, 404, "process_id"),
    (NotFound, 404, "table_id"),
    (NotADynamicTable, 404, "table_id"),
    (TableManagedByCode, 409, "table_id"),
    (CatalogManagedByCode, 409, "name"),
    (PolicyManagedByCode, 409, "name"),
    (CatalogInUse, 409, "name"),
    (TableManagedByStore, 409, "table_id"),
    (TableManagedByPolicy, 409, "table_id"),
    (CatalogConflict, 409, "catalog"),
    (Conflict, 409, "table_id"),
    (DynamicStateChanged, 409, "state"),
    (DuplicateRun, 409, "instant"),
    (IllegalTransition, 409, "status"),
    (UnreadableTable, 409, "table_id"),
    (UnreadableCatalog, 409, "catalog"),
    (UnknownAction, 422, "action"),
    (DeclarationsRejected, 422, "body"),
    (InvalidDeclaration, 422, "body"),
    (HealthUnavailable, 502, "table_id"),
    (StoreUnavailable, 503, "store"),
    (CatalogUnavailable, 503, "catalog"),
]


def status_and_field(exc: Exception) -> tuple[int, str]:
    for cls, status, default_field in _MAPPING:
        if isinstance(exc, cls):
            return status, _leading_field(str(exc)) or default_field
    return 400, _leading_field(str(exc)) or "request"


# Where a service says the value came from, before the path inside it.
_SOURCES = {"body", "dynamic table"}


def _leading_field(message: str) -> str | None:
    """``"priority: must be ..."`` -> ``priority``: service messages start with the field they judge."""
    head, sep, rest = message.partition(": ")
    head = head.strip().lstrip("-")
    if head in _SOURCES and sep:  # "body: actions.x.interval: ..." names the request body's path
        return _leading_field(rest) or head
    if sep and head and " " not in head and len(head) <= 80:
        return head
    return None


def error_body(detail: str, field: str, **extra: Any) -> dict[str, Any]:
    return {"detail": detail, "field": field, **extra}


def _loc(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("body", "actions", "expire-snapshots")`` -> ``actions.expire-snapshots``: the path the
    caller wrote; the request part stays only when it is all there is."""
    parts = [str(p) for p in loc]
    if len(parts) > 1 and parts[0] in ("body", "path", "query", "header", "cookie"):
        parts = parts[1:]
    return ".".join(parts) or "request"


def _message(error: Mapping[str, Any]) -> str:
    """Pydantic's message, with the value when a string broke a pattern or a length (the rule is in
    the message already): errors name the field, the value and what is allowed."""
    msg = str(error.get("msg", ""))
    value = error.get("input")
    if str(error.get("type", "")).startswith("string_") and isinstance(value, str):
        shown = value if len(value) <= 80 else value[:80] + "..."
        msg = f"{msg}, got {shown!r}"
    return msg


async def _validation_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"field": _loc(e.get("loc", ())), "message": _message(e), "type": e.get("type", "")}
        for e in exc.errors()
    ]
    first = errors[0] if errors else {"field": "request", "message": "invalid request"}
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors) or "invalid request"
    return JSONResponse(status_code=422, content=error_body(detail, first["field"], errors=errors))


async def _service_handler(_request: Request, exc: Exception) -> JSONResponse:
    status, field = status_and_field(exc)
    extra: dict[str, Any] = {}
    if isinstance(exc, DeclarationsRejected):
        extra["errors"] = exc.errors
    return JSONResponse(status_code=status, content=error_body(str(exc), field, **extra))


async def _api_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return JSONResponse(status_code=exc.status, content=error_body(exc.detail, exc.field))


_INVALID_TOKEN = "Invalid JWT token"  # airflow.api_fastapi.core_api.security.resolve_user_from_token
_HTTP_FIELDS = {401: "authorization", 403: "permission", 404: "path", 405: "method"}


_METHOD_ORDER = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app takes at this path (Starlette's 405 names only the first
    route that matched the path, e.g. ``Allow: GET`` where PATCH and DELETE are routes of their own)."""
    methods: set[str] = set()
    for route in getattr(request.app, "routes", ()):
        match, _ = route.matches(request.scope)
        if match != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    methods.discard("HEAD")
    return sorted(methods | {"OPTIONS"}, key=lambda m: (_METHOD_ORDER + (m,)).index(m))


async def _http_handler(request: Request, exc: Exception) -> Response:
    """Airflow's 401/403 and routing errors, in the same shape (``field`` says what to fix). A 401
    always says how to authenticate (``WWW-Authenticate: Bearer``: a missing token, a Basic header and a
    bad token alike); a 405 lists every method of the path, and ``OPTIONS`` answers 204 with them."""
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    status, headers = exc.status_code, dict(getattr(exc, "headers", None) or {})
    if status == 403 and detail == _INVALID_TOKEN:
        # Airflow answers 403 for a token it cannot verify; the caller is not authenticated: 401.
        status = 401
    if status == 401:
        headers.setdefault("WWW-Authenticate", "Bearer")
    if status == 405:
        headers["Allow"] = ", ".join(_allowed_methods(request))
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=headers)
    field = _HTTP_FIELDS.get(status, "request")
    return JSONResponse(status_code=status, content=error_body(detail, field), headers=headers or None)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(StarletteHTTPException, _http_handler)
    app.add_exception_handler(RequestValidationError, _validation_handler)
    app.add_exception_handler(TableMgmtError, _service_handler)
    app.add_exception_handler(ApiError, _api_handler)


class BodyTooLarge(Exception):
    """A request body grew past the size limit while it was read (api/limits.py answers 413)."""
