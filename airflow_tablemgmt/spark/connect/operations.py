"""A Connect job's server-side operations, seen from another process: which ones it started, and
whether they have *ended* (not merely been asked to stop).

Spark 3.5's Connect server cannot list a session's operations, and ``interruptTag`` is no observation:
it returns the ids of the operations it *newly* interrupted (``ExecuteThreadRunner.interrupt`` answers
false for one already interrupted, however long its thread runs on), so a second call returns nothing
while the first one's operation may still be committing. Two things make observation possible:

* the job records the ids of the operations it starts in its own server-side session, in the session
  setting :data:`OPERATIONS_CONF` (one ``Config`` request before each ``ExecutePlan``, whose
  ``operation_id`` the client then sets itself: :func:`record_operations`). That setting lives on the
  server and outlives a worker killed with -9 or frozen;
* ``ReattachExecute`` to an operation streams its responses until its execution thread has sent the
  last one -- the result, or the error it ended with (``OPERATION_CANCELED`` after an interrupt) -- and
  answers ``INVALID_HANDLE.OPERATION_NOT_FOUND`` / ``OPERATION_ABANDONED`` for one that is gone.

:func:`stop_and_observe` combines them: interrupt the tag, then reattach to every recorded (and every
interrupted) operation until the server reports it ended, bounded. pyspark is imported inside functions.
"""

from __future__ import annotations

import inspect
import logging
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: The session setting in which a job lists its latest operations: ``<tag> <op id>,<op id>,...``.
OPERATIONS_CONF = "spark.tablemgmt.operations"
#: How many operation ids are chosen and recorded ahead at a time (a job's operations run one at a time; the
#: setting holds these and the last one sent).
KEEP = 4
#: The ends of an operation the server reports on a reattach (error classes in the gRPC status).
_GONE = ("OPERATION_NOT_FOUND", "OPERATION_ABANDONED", "SESSION_NOT_FOUND")


def record_operations(
    session: Any, tag: str, fence: Callable[[], None] | None = None, conf: dict[str, str] | None = None
) -> None:
    """Make every ``ExecutePlan`` of ``session`` carry an operation id chosen here and recorded in the
    session's :data:`OPERATIONS_CONF` on the server before the operation is sent. ``fence`` is called
    first and may refuse the operation (raise): a job whose lease is no longer confirmed sends none.

    The ids are chosen :data:`KEEP` at a time, ahead of their operations, and recorded together with the
    last one sent, so only every :data:`KEEP`-th operation costs a ``Config`` request of its own. With
    ``conf`` (the settings the caller sends in its own ``Config`` request before any operation: the job's
    catalog, ``ConnectRun.open``) the first ids go with those, and a small job makes no request for them
    at all. An id recorded but not sent yet is one the server does not know: an observer counts it ended
    (``operation_ended``), as it would count an operation sent after it looked, which
    :func:`stop_and_observe` interrupts and observes after its first look.

    Called again on the same session (a batch's next job on its kept session), the new tag and fence
    replace the earlier ones. The hook holds the client and a bound ``fence`` weakly: a strong one would
    make the session a reference cycle, which only Python's cycle collector frees, at any moment and in
    any thread, and pyspark's ``SparkSession.__del__`` must not run in the thread that sends its releases
    (``client.close_session``)."""
    from airflow_tablemgmt.spark.connect.config import set_client_conf

    client = session.client
    make_request = type(client)._execute_plan_request_with_metadata  # noqa: SLF001 - where requests are made
    client_ref = weakref.ref(client)
    fence_ref: Callable[[], Callable[[], None] | None]
    if inspect.ismethod(fence):
        fence_ref = weakref.WeakMethod(fence)
    else:
        fence_ref = lambda: fence  # noqa: E731 - a plain function holds no session
    planned: list[str] = []  # recorded, not sent yet
    sent: list[str] = []  # the last one sent

    def plan() -> dict[str, str]:
        planned[:] = [str(uuid.uuid4()) for _ in range(KEEP)]
        return {OPERATIONS_CONF: f"{tag} {','.join([*sent, *planned])}"}

    if conf is not None:
        conf.update(plan())

    def with_recorded_id() -> Any:
        current = client_ref()
        if current is None:
            raise RuntimeError(f"the Connect client of job {tag} is closed")
        check = fence_ref()
        if check is not None:
            check()
        req = make_request(current)
        if not planned:
            set_client_conf(current, plan())
        op = planned.pop(0)
        sent[:] = [op]
        req.operation_id = op  # the reattachable iterator keeps an id the request already has
        return req

    client._execute_plan_request_with_metadata = with_recorded_id  # noqa: SLF001


def recorded_operations(session: Any, tag: str) -> list[str]:
    """The operation ids the job tagged ``tag`` recorded in ``session`` (none: another job's, or none)."""
    from airflow_tablemgmt.spark.connect.config import conf_with_prefix

    for key, value in conf_with_prefix(session, OPERATIONS_CONF):
        if key == OPERATIONS_CONF and value.startswith(f"{tag} "):
            return [op for op in value[len(tag) + 1 :].split(",") if op]
    return []


def operation_ended(session: Any, operation_id: str, deadline: float) -> bool:
    """Reattach to ``operation_id`` and read its stream until the server reports it ended: True; False
    when ``deadline`` (monotonic) passed first or the server could not be asked."""
    import grpc
    import pyspark.sql.connect.proto as pb2

    client = session.client
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        req = pb2.ReattachExecuteRequest(session_id=client._session_id, operation_id=operation_id)  # noqa: SLF001
        req.client_type = client._builder.userAgent  # noqa: SLF001
        if client._user_id:  # noqa: SLF001
            req.user_context.user_id = client._user_id  # noqa: SLF001
        try:
            for response in client._stub.ReattachExecute(  # noqa: SLF001
                req,
                metadata=client._builder.metadata(),
                timeout=left,  # noqa: SLF001
            ):
                if response.HasField("result_complete"):
                    return True
        except grpc.RpcError as e:
            code = e.code() if callable(getattr(e, "code", None)) else None
            text = f"{e.details() if callable(getattr(e, 'details', None)) else e}"
            log.debug("reattach to %s: %s %s", operation_id, code, text[:300])
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return False
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED):
                log.warning("reattaching to operation %s failed: %s", operation_id, text[:300])
                return False
            if "INVALID_CURSOR" in text:
                # Not an end: another client attached to the operation's stream (a reattach disconnects the
                # one before it), or the server could not resume it. Look again while the bound lasts.
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                continue
            # The operation ended with this error (OPERATION_CANCELED after an interrupt, its own failure),
            # or is gone (not found, abandoned): either way its execution thread is done.
            return True
        # The stream ended without ResultComplete: the server's sender reached its maximum stream duration
        # while the operation runs on. Reattach again.


def stop_and_observe(
    session: Any, tag: str, bound_s: float, connect_url: str | None = None
) -> tuple[bool, list[str]]:
    """Interrupt ``tag`` on ``session`` and wait (at most ``bound_s``) until the server reports every
    operation of the job ended and, with ``connect_url`` (the server's), every Spark task of those
    operations ended too (``tasks.py``): ``(all ended, the operation ids looked at)``."""
    deadline = time.monotonic() + bound_s
    interrupted = list(session.interruptTag(tag))
    ops = list(dict.fromkeys([*interrupted, *recorded_operations(session, tag)]))
    ended = all(operation_ended(session, op, deadline) for op in ops)
    if ended:  # one started in between (a live client's next step) is interrupted and observed too
        later = [op for op in session.interruptTag(tag) if op not in ops]
        ended = all(operation_ended(session, op, deadline) for op in later)
        ops += later
    if ended and connect_url is not None:
        # An operation's thread ends before the cancelled Spark tasks it started do: wait for those too.
        from airflow_tablemgmt.spark.connect.tasks import tasks_ended

        tasks = tasks_ended(session, connect_url, tag, ops, deadline)
        if tasks is None:
            log.warning(
                "%s: the Connect server's UI is off, so its Spark tasks cannot be seen to end; its "
                "operations ended (a task of a cancelled job may still finish a file)",
                tag,
            )
        ended = tasks is not False
    return ended, ops


def end_application(application_id: str, bound_s: float, url: str | None = None) -> bool | None:
    """Interrupt the job a process recorded as ``application_id`` (``connect:<server>#<session>/<tag>``)
    and wait until its server reports its operations ended: True when they did within ``bound_s``,
    False when not (or the server could not be asked), None when the id is not a Connect job's.
    ``url``: the server's URL with its parameters (token, user_id) when it is the same server."""
    from airflow_tablemgmt.spark.connect.client import APP_ID_PREFIX, close_session, open_session, server_of

    if not application_id.startswith(APP_ID_PREFIX) or "#" not in application_id:
        return None
    server, rest = application_id[len(APP_ID_PREFIX) :].rsplit("#", 1)
    session_id, _, tag = rest.partition("/")
    if not tag:
        return None
    target = url if url is not None and server_of(url) == server else server
    try:
        session = open_session(target, session_id)
    except Exception as e:  # noqa: BLE001 - an unreachable server: nothing observed
        log.warning("could not reach %s to end %s: %s", server, tag, str(e)[:300])
        return False
    try:
        ended, ops = stop_and_observe(session, tag, bound_s, target)
    except Exception as e:  # noqa: BLE001
        log.warning("ending %s on %s failed: %s", tag, server, str(e)[:300])
        return False
    finally:
        try:
            close_session(session)
        except Exception:  # noqa: BLE001
            log.debug("closing the observer's channel failed", exc_info=True)
    log.info(
        "%s on %s: %d operation(s) %s",
        tag,
        server,
        len(ops),
        "reported ended" if ended else f"not reported ended within {bound_s:g}s",
    )
    return ended
