"""The status API's GETs over kept-alive connections (``spark/connect/ui_http.py``), against a real HTTP/1.1
server on a local port that counts the connections it accepts."""

from __future__ import annotations

import threading
import time
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablemgmt.spark.connect import ui_http
from tests.support.status_api import StatusApiServer


def _answer(path: str) -> tuple[int, Any]:
    """Each path's own name back; ``/missing...`` is unknown."""
    if path.startswith("/missing"):
        return 404, {"message": "unknown"}
    return 200, {"path": path}


@pytest.fixture
def server() -> Iterator[StatusApiServer]:
    # HTTP/1.1 keeps a connection open between requests, as Jetty does; ``/close...`` is answered, then
    # its connection closed (an idle timeout)
    with StatusApiServer(
        answer=_answer, keep_alive=True, closes=lambda path: path.startswith("/close")
    ) as api:
        try:
            yield api
        finally:
            ui_http.close_idle()


@pytest.fixture
def ui(server: StatusApiServer) -> str:
    return server.url


def _deadline() -> float:
    return time.monotonic() + 10


def test_requests_to_one_ui_share_a_kept_connection_across_threads(ui: str, server: StatusApiServer) -> None:
    assert ui_http.get_json(f"{ui}/api/v1/jobs/1?x=1", _deadline()) == {"path": "/api/v1/jobs/1?x=1"}
    for i in range(5):
        assert ui_http.get_json(f"{ui}/api/v1/stages/{i}", _deadline())["path"] == f"/api/v1/stages/{i}"
    # a table's thread after another's: the idle connection is theirs too
    seen: list[str] = []
    t = threading.Thread(target=lambda: seen.append(ui_http.get_json(f"{ui}/t", _deadline())["path"]))
    t.start()
    t.join()
    assert seen == ["/t"]
    assert server.connections == 1  # urllib opened one a request: 7


def test_an_error_answer_raises_its_code_and_keeps_the_connection(ui: str, server: StatusApiServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as raised:
        ui_http.get_json(f"{ui}/missing/3", _deadline())
    assert raised.value.code == 404
    assert ui_http.get_json(f"{ui}/after", _deadline()) == {"path": "/after"}
    assert server.connections == 1


def test_a_connection_the_server_closed_is_replaced(ui: str, server: StatusApiServer) -> None:
    assert ui_http.get_json(f"{ui}/close", _deadline()) == {"path": "/close"}  # the server closes it
    assert ui_http.get_json(f"{ui}/next", _deadline()) == {"path": "/next"}
    assert server.connections == 2
    # an idle connection the server dropped without a word: the request goes again on a new one
    with ui_http._lock:  # noqa: SLF001 - the kept connection, cut from the server's side
        (conn,) = [c for idle in ui_http._idle.values() for c in idle]  # noqa: SLF001
    assert conn.sock is not None
    conn.sock.shutdown(2)
    assert ui_http.get_json(f"{ui}/again", _deadline()) == {"path": "/again"}
    assert server.connections == 3


def test_no_time_left_is_a_timeout_before_any_request(ui: str, server: StatusApiServer) -> None:
    with pytest.raises(TimeoutError, match="no time left"):
        ui_http.get_json(f"{ui}/late", time.monotonic() - 1)
    assert server.connections == 0
