"""GETs of JSON from a Spark server's web UI (its REST status API) over kept-alive connections.

A batch reads each table's cost from the server's status API while the server runs the next table's
procedure (``cost.py``): a few small requests a table. Opened one connection each (``urllib``), every request
costs the server's driver a connection's accept and set-up beside that procedure, and the worker a new
socket and urllib's handler chain. Here the connections to one UI are kept and reused by any thread (at most
:data:`IDLE_PER_HOST` idle ones), and a request on a connection the server has closed meanwhile (Jetty's idle
timeout, a restart) is sent once more on a new one.

What this does not handle goes through ``urllib`` as before: a URL a proxy applies to (``http_proxy``,
``no_proxy``), and an answer that redirects.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

#: Idle connections kept per UI (scheme, host and port).
IDLE_PER_HOST = 4

_lock = threading.Lock()
_idle: dict[tuple[str, str], list[http.client.HTTPConnection]] = {}
#: What a reused connection the server closed meanwhile raises on its next request.
_STALE = (
    http.client.RemoteDisconnected,
    http.client.CannotSendRequest,
    BrokenPipeError,
    ConnectionResetError,
)


def get_json(url: str, deadline: float) -> Any:
    """The JSON document at ``url``, before ``deadline`` (monotonic). An answer of 400 or more raises
    :class:`urllib.error.HTTPError` with its code (as ``urllib.request.urlopen`` does)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"no time left to read {url}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or _proxied(url, parts.hostname or ""):
        return _by_urllib(url, left)
    key = (parts.scheme, parts.netloc)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    while True:
        conn, reused = _take(key, left)
        try:
            conn.request("GET", target or "/", headers={"Accept": "application/json"})
            answer = conn.getresponse()
            body = answer.read()
        except _STALE:
            conn.close()
            if reused:  # closed by the server while idle: once more on a new connection
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no time left to read {url}") from None
                continue
            raise
        except BaseException:
            conn.close()
            raise
        if answer.will_close:
            conn.close()
        else:
            _give_back(key, conn)
        if 300 <= answer.status < 400:
            return _by_urllib(url, max(deadline - time.monotonic(), 0.001))  # urllib follows redirects
        if answer.status >= 400:
            raise urllib.error.HTTPError(url, answer.status, answer.reason, answer.headers, None)
        return json.loads(body.decode("utf-8"))


def close_idle() -> None:
    """Close every idle connection (tests; a worker that ends closes them with its process)."""
    with _lock:
        conns = [c for idle in _idle.values() for c in idle]
        _idle.clear()
    for conn in conns:
        conn.close()


def _take(key: tuple[str, str], timeout: float) -> tuple[http.client.HTTPConnection, bool]:
    with _lock:
        idle = _idle.get(key)
        conn = idle.pop() if idle else None
    if conn is not None:
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn, True
    scheme, netloc = key
    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    return cls(netloc, timeout=timeout), False


def _give_back(key: tuple[str, str], conn: http.client.HTTPConnection) -> None:
    with _lock:
        idle = _idle.setdefault(key, [])
        if len(idle) < IDLE_PER_HOST:
            idle.append(conn)
            return
    conn.close()


def _proxied(url: str, host: str) -> bool:
    proxies = urllib.request.getproxies()
    scheme = urlsplit(url).scheme
    return scheme in proxies and not urllib.request.proxy_bypass(host)


def _by_urllib(url: str, timeout: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 - an http(s) URL of the UI
        return json.loads(answer.read().decode("utf-8"))


__all__ = ["IDLE_PER_HOST", "close_idle", "get_json"]
