"""A stand-in for Spark's web UI REST status API (``/api/v1/applications/<id>/...``), for the unit tests of
the code that reads it (``spark/connect/ui_http.py``, ``cost.py``, ``job_index.py``, ``tasks.py``): a
threaded HTTP server on a loopback port (port 0: the system picks a free one) answering GETs with JSON.

What it serves: ``documents`` maps a path (without its query) to the JSON document served there, 404
elsewhere; or, for answers that depend on more than the path (the moment, the query, a store the test
changes), ``answer`` is called with the whole path and returns ``(status, document)``. A test may change
either while the server runs. Every GET's path (with its query) is recorded in ``requests`` before it is
answered, and ``connections`` counts the connections accepted. HTTP/1.0 (a connection a request) unless
``keep_alive``: then HTTP/1.1, as Jetty answers, and a path ``closes`` is true of gets its answer and then
the connection closed (an idle timeout). Use it as a context manager (a test's fixture ``with``-s it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

Answer = Callable[[str], tuple[int, Any]]  # a GET's path (with its query) -> (status, JSON document)


class StatusApiServer:
    def __init__(
        self,
        documents: Mapping[str, Any] | None = None,
        answer: Answer | None = None,
        keep_alive: bool = False,
        closes: Callable[[str], bool] | None = None,
    ) -> None:
        self.documents: dict[str, Any] = dict(documents or {})
        self.answer: Answer = answer or self._document
        self.requests: list[str] = []
        self.connections = 0
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def setup(self) -> None:
                with api._lock:
                    api.connections += 1
                super().setup()

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                with api._lock:
                    api.requests.append(self.path)
                status, document = api.answer(self.path)
                if closes is not None and closes(self.path):
                    self.close_connection = True
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port: int = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="status-api", daemon=True).start()

    @property
    def url(self) -> str:
        """The UI's root (``http://127.0.0.1:<port>``), where a real one serves ``/api/v1``."""
        return f"http://127.0.0.1:{self.port}"

    def _document(self, path: str) -> tuple[int, Any]:
        document = self.documents.get(path.split("?")[0])
        return (404, {"message": f"no document at {path}"}) if document is None else (200, document)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> StatusApiServer:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
