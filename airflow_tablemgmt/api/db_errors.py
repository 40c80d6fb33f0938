"""A value the database refuses is the caller's 422, not the server's 500.

The services validate every string field (``core/text.py``), so these handlers are the safety net
for whatever slips through: PostgreSQL's ``DataError`` (a string longer than its ``VARCHAR(n)``, an
invalid JSON escape, a number out of range) and psycopg2's ``ValueError`` for a NUL byte, which it
raises before the statement reaches the server. ``field`` is the request part that carries the
offending value when it can be found (a path or query parameter, a statement parameter's column),
else ``body``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError

_VARCHAR = re.compile(r"character varying\((\d+)\)")
_NUL_MESSAGE = "cannot contain NUL"
# Store columns whose API field has another name.
_COLUMN_FIELDS = {"owner_team": "owner", "type": "type"}


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _bad(value: Any, max_len: int | None) -> bool:
    return any("\x00" in s or (max_len is not None and len(s) > max_len) for s in _strings(value))


def _request_field(request: Request, max_len: int | None) -> str | None:
    for name, value in request.path_params.items():
        if _bad(value, max_len):
            return str(name)
    for name, value in request.query_params.multi_items():
        if _bad(value, max_len):
            return str(name)
    return None


def _statement_field(params: Any, max_len: int | None) -> str | None:
    rows = params if isinstance(params, (list, tuple)) else [params]
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        for column, value in row.items():
            if _bad(value, max_len):
                name = re.sub(r"_\d+$", "", str(column))  # SQLAlchemy's bind names: table_id_1
                return _COLUMN_FIELDS.get(name, name)
    return None


def _answer(detail: str, field: str) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": detail, "field": field})


async def _data_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DataError)
    reason = str(getattr(exc, "orig", exc) or exc).strip().splitlines()[0]
    match = _VARCHAR.search(reason)
    max_len = int(match.group(1)) if match else None
    field = _request_field(request, max_len) or _statement_field(exc.params, max_len) or "body"
    limit = f"at most {max_len} characters, " if max_len else ""
    return _answer(
        f"{field}: the store refused the value ({reason}); allowed: {limit}no NUL characters", field
    )


async def _value_error(request: Request, exc: Exception) -> JSONResponse:
    if _NUL_MESSAGE not in str(exc):
        raise exc  # not a value the database refused: a server error, as before
    field = _request_field(request, None) or "body"
    return _answer(f"{field}: contains a NUL character (U+0000), which the store cannot keep", field)


def install_db_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(DataError, _data_error)
    app.add_exception_handler(ValueError, _value_error)
