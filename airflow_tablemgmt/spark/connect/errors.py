"""The Spark Connect engine's exceptions, and the short reason a Connect failure is recorded with."""

from __future__ import annotations

import re

from airflow_tablemgmt.core.errors import TableMgmtError


class ConnectUnavailable(TableMgmtError):
    """The Spark Connect server refused the connection, could not be reached, or died during the job.
    The message names the server; Airflow's retry runs the job again."""


class ConnectBusy(ConnectUnavailable):
    """Every slot of the Spark Connect server (its slot limit) stayed held by other tasks for as long as
    the task waits for one. The message names the server and the limit; Airflow's retry tries again."""


class NotOnConnect(TableMgmtError):
    """An action that needs the Spark driver's JVM (py4j) and therefore runs only through spark-submit."""


#: A reason's longest length: a process row's reason and the page's History cell stay readable.
REASON_CHARS = 300

_STATUS = re.compile(r"status\s*=\s*StatusCode\.([A-Z_]+)")
_DETAILS = re.compile(r'details\s*=\s*"([^"\n]*)')
_REPR_HEAD = re.compile(r"^<_?\w+ of RPC that terminated with:\s*$")


def is_grpc_repr(text: str) -> bool:
    """Whether ``text`` is (or holds) gRPC's repr of a failed call rather than a message of its own."""
    return bool(_STATUS.search(text)) or "of RPC that terminated with" in text


def connect_reason(error: BaseException | str, limit: int = REASON_CHARS) -> str:
    """A Spark Connect failure as one short line: the gRPC status code and the server's message (its first
    line), e.g. ``UNAVAILABLE: failed to connect to all addresses; last error: … Connection refused``.

    gRPC's errors print as a multi-line repr (``<_InactiveRpcError of RPC that terminated with: status =
    … details = … debug_error_string = …>``, ~400 characters, the useful part in the middle); pyspark's
    Connect exceptions carry the server's message, sometimes with the JVM's stack below it. Either an
    exception (``code()``/``details()`` are read when it has them) or a text already made of one.
    """
    code: str | None = None
    details: str | None = None
    if isinstance(error, BaseException):
        code_of, details_of = getattr(error, "code", None), getattr(error, "details", None)
        if callable(code_of) and callable(details_of):
            try:
                status = code_of()
                code = str(getattr(status, "name", status))
                details = str(details_of() or "")
            except Exception:  # noqa: BLE001 - a broken error object still has its text
                code = details = None
        text = str(error)
    else:
        text = error
    if code is None:
        found = _STATUS.search(text)
        code = found.group(1) if found else None
        found = _DETAILS.search(text)
        details = found.group(1) if found else None
    if details is None:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not _REPR_HEAD.match(ln.strip())]
        details = lines[0] if lines else type(error).__name__ if isinstance(error, BaseException) else ""
    details = details.strip().splitlines()[0].strip() if details.strip() else ""
    reason = f"{code}: {details}" if code and details else code or details or "unknown error"
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"
