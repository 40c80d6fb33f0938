"""The job's result protocol: exactly one JSON line on stdout, marked ``"tms_result": 1``.

Success::

    {"tms_result": 1, "status": "SUCCESS", "action": "rewrite-files", "table": "lake.db.t",
     "application_id": "local-17...", "duration_seconds": 4.2, "summary": {...}}

Failure::

    {"tms_result": 1, "status": "FAILED", "action": "...", "table": "...", "application_id": ...,
     "duration_seconds": ..., "error_class": "TABLE_OR_VIEW_NOT_FOUND", "error": "..."}

A success's ``summary`` carries ``timings``: seconds per phase of the run (see :class:`Timings`),
completed by the submitting side with what only it can see (spark-submit's start, the JVM's exit), and
``cost``: what the run cost in executor time and bytes (``core/cost.py``), which a failure carries as
``"cost"`` beside its error.

Both sides share this module; it imports no pyspark so the Airflow side can parse results.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

RESULT_MARKER = "tms_result"
SUCCESS = "SUCCESS"
FAILED = "FAILED"
NO_RESULT = "NoJobResult"
#: The attribute a submitter may set on a :class:`JobResult` to a call that completes it after the job (the
#: Connect engine's cost read and figures on a batch's kept session: ``spark/connect/finish_later.py``); the
#: batch runs it before the lifecycle records the result (``services/batch_finish.py``).
FINISH_LATER = "finish_later"
_MAX_ERROR_LINES = 8
_MAX_ERROR_CHARS = 2000


@dataclass
class JobResult:
    """A parsed result line. ``summary`` is what gets persisted as the process summary."""

    status: str
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_class: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == SUCCESS

    @property
    def application_id(self) -> str | None:
        value = self.raw.get("application_id")
        return str(value) if value is not None else None

    @property
    def duration_seconds(self) -> float | None:
        value = self.raw.get("duration_seconds")
        return float(value) if value is not None else None

    @property
    def cost(self) -> dict[str, Any] | None:
        """What the run cost (``core/cost.py``): a success's ``summary["cost"]``, a failure's ``cost``
        beside its error; None when nothing measured it."""
        value = self.summary.get("cost") if isinstance(self.summary, dict) else None
        value = value if isinstance(value, dict) else self.raw.get("cost")
        return value if isinstance(value, dict) else None


# Phases in the order a run goes through them; the log line and the benchmark print them in this order.
PHASES = (
    ("hook_setup", "hook set-up"),
    ("spark_submit", "spark-submit to driver JVM"),
    ("driver_jvm", "driver JVM to Python"),
    ("python_startup", "Python start-up"),
    ("imports", "imports"),
    ("session", "session"),
    ("table_load", "table load"),
    ("metrics_before", "metrics before"),
    ("procedure", "procedure"),
    ("metrics_after", "metrics after"),
    ("cost", "cost (Spark's metrics read)"),
    ("maintainer_other", "maintainer other"),
    ("session_stop", "session stop"),
    ("jvm_exit", "JVM exit"),
    ("result_parse", "result parse"),
)
PHASE_NAMES = tuple(name for name, _ in PHASES)


class Timings:
    """Seconds spent in each phase of one run, summed when a phase repeats, rounded to the ms.

    The job records into the current ``Timings`` (``timed("procedure")``); outside a job (a
    maintainer called directly) ``timed`` records nothing.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = round(self.seconds.get(phase, 0.0) + max(seconds, 0.0), 3)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def as_dict(self) -> dict[str, float]:
        return dict(self.seconds)


_CURRENT: ContextVar[Timings | None] = ContextVar("tablemgmt_timings", default=None)


@contextmanager
def recording(timings: Timings) -> Iterator[Timings]:
    """Make ``timings`` the one :func:`timed` records into, for the duration of the block."""
    token = _CURRENT.set(timings)
    try:
        yield timings
    finally:
        _CURRENT.reset(token)


def current_timings() -> Timings | None:
    """The ``Timings`` being recorded into, if any."""
    return _CURRENT.get()


@contextmanager
def timed(phase: str) -> Iterator[None]:
    """Time the block as ``phase`` of the current run, if one is recording."""
    timings = _CURRENT.get()
    if timings is None:
        yield
        return
    with timings.phase(phase):
        yield


def describe_timings(timings: dict[str, Any]) -> str:
    """One log line: the phases present, in run order, then any others, then the total."""
    known = [(name, label) for name, label in PHASES if name in timings]
    extra = [(name, name) for name in timings if name not in PHASE_NAMES and name != "total"]
    parts = [f"{label} {float(timings[name]):.2f}s" for name, label in known + extra]
    if "total" in timings:
        parts.append(f"total {float(timings['total']):.2f}s")
    return ", ".join(parts)


def success_line(
    action: str,
    table: str,
    summary: dict[str, Any],
    *,
    duration_seconds: float | None = None,
    application_id: str | None = None,
    jvm_started_at: float | None = None,
) -> str:
    payload: dict[str, Any] = {
        RESULT_MARKER: 1,
        "status": SUCCESS,
        "action": action,
        "table": table,
        "application_id": application_id,
        "duration_seconds": duration_seconds,
        "summary": summary,
    }
    if jvm_started_at is not None:
        # Epoch seconds; the submitting side subtracts its own start to time spark-submit's launch.
        payload["jvm_started_at"] = round(jvm_started_at, 3)
    return json.dumps(payload, default=str, separators=(",", ":"))


def failure_line(
    action: str | None,
    table: str | None,
    error_class: str,
    error: str,
    *,
    duration_seconds: float | None = None,
    application_id: str | None = None,
    timings: dict[str, float] | None = None,
    cost: dict[str, Any] | None = None,
) -> str:
    payload: dict[str, Any] = {
        RESULT_MARKER: 1,
        "status": FAILED,
        "action": action,
        "table": table,
        "application_id": application_id,
        "duration_seconds": duration_seconds,
        "error_class": error_class,
        "error": error,
    }
    if timings:
        payload["timings"] = timings
    if cost:  # a failed run cost its executors too (core/cost.py)
        payload["cost"] = cost
    return json.dumps(payload, default=str, separators=(",", ":"))


def _as_result(line: str) -> dict[str, Any] | None:
    text = line.strip()
    if not (text.startswith("{") and RESULT_MARKER in text):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get(RESULT_MARKER) == 1:
        return data
    return None


def parse_result(lines: Iterable[str]) -> JobResult:
    """Find the job's result line among ``lines`` (stdout, or a mixed task log).

    When there is none (the job died before printing it) the result is FAILED with
    ``error_class="NoJobResult"``, ``error=None`` and an empty ``raw``: the caller knows where
    the log is and fills in the reason. Should a job ever print more than one, the last wins.
    """
    found = [data for data in map(_as_result, lines) if data is not None]
    if not found:
        return JobResult(status=FAILED, error_class=NO_RESULT)
    if len(found) > 1:
        log.warning("the job printed %d result lines; using the last", len(found))
    data = found[-1]
    status = str(data.get("status", FAILED))
    summary = data.get("summary") if isinstance(data.get("summary"), dict) else {}
    return JobResult(
        status=status if status in (SUCCESS, FAILED) else FAILED,
        summary=summary or {},
        error=data.get("error"),
        error_class=data.get("error_class"),
        raw=data,
    )


def _meaningful_lines(text: str) -> list[str]:
    """Drop JVM/Python stack frames and blank lines; keep messages and ``Caused by:`` lines."""
    out: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("at ", "... ", "File ", "Traceback ")):
            continue
        if stripped in ("JVM stacktrace:", "== SQL ==") or stripped.startswith("^^^"):
            continue
        out.append(stripped)
    return out


def describe_exception(exc: BaseException) -> tuple[str, str]:
    """``(error_class, message)`` for a result line: the relevant Spark/Iceberg message, not a stack.

    Works by duck typing on pyspark's ``CapturedException`` (``getErrorClass``) and py4j's
    ``Py4JJavaError`` (``java_exception``) so this module stays importable without pyspark.
    """
    error_class = type(exc).__name__
    text = str(exc)
    get_error_class = getattr(exc, "getErrorClass", None)
    if callable(get_error_class):
        try:
            error_class = get_error_class() or error_class
        except Exception:  # noqa: BLE001 - a broken JVM must not hide the original error
            pass
    java_exc = getattr(exc, "java_exception", None)
    if java_exc is not None:
        try:
            error_class = str(java_exc.getClass().getName()).rsplit(".", 1)[-1]
            text = str(java_exc.getMessage() or java_exc.toString())
        except Exception:  # noqa: BLE001
            pass
    lines = _meaningful_lines(text)[:_MAX_ERROR_LINES] or [error_class]
    message = "\n".join(lines)
    if len(message) > _MAX_ERROR_CHARS:
        message = message[: _MAX_ERROR_CHARS - 3] + "..."
    return error_class, message


_USERINFO = re.compile(r"//[^/@]*@")

# Iceberg's exceptions that mean "the catalog service failed or refused", not "the table or the query is
# wrong": their messages ("Service failed: 503", "Not authorized") do not say which catalog answered.
_CATALOG_SERVICE_ERRORS = frozenset(
    {
        "ServiceFailureException",
        "ServiceUnavailableException",
        "CommitStateUnknownException",
        "RESTException",
        "NotAuthorizedException",
        "ForbiddenException",
        "BadRequestException",
    }
)


def name_the_catalog(error_class: str | None, message: str, catalog: Mapping[str, Any]) -> str:
    """``message`` prefixed with the catalog that failed (its name, type and URI, no credentials) when
    ``error_class`` is a catalog-service failure, so a process's reason says where to look."""
    if error_class not in _CATALOG_SERVICE_ERRORS:
        return message
    props = catalog.get("properties") or {}
    where = str(catalog.get("type") or "catalog")
    uri = props.get("uri") or props.get("airflow-connection")
    if uri:
        where += f" at {_USERINFO.sub('//', str(uri))}"
    return f"catalog {catalog.get('name', '?')} ({where}) failed: {message}"
