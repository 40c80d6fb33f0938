"""An HTTP reverse proxy the test controls, for faults a TCP proxy cannot express: a catalog server that
answers one kind of request (a commit) with 503, or a storage endpoint that throttles.

Requests are forwarded as they came (method, path, headers including Host, body), so signed requests
(SigV4) still verify upstream. ``rules`` decide per request: ``None`` forwards it, an int answers that
status without forwarding. Every request is counted by (method, first path segment, answer). Threads,
not asyncio: the code under test is synchronous.
"""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

Rule = Callable[[str, str], int | None]  # (method, path) -> None to forward, or a status to answer

_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class HttpFaultProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.rules: list[Rule] = []
        self.seen: Counter[tuple[str, str, int]] = Counter()
        self.injected: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _handle(self) -> None:
                body = self._body()
                status = proxy._decide(self.command, self.path)
                if status is not None:
                    payload = b'{"error": {"message": "injected by the test proxy", "code": %d}}' % status
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    proxy._count(self.command, self.path, status, injected=True)
                    return
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=120)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    if body is not None:
                        headers["Content-Length"] = str(len(body))
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in _HOP and k.lower() != "content-length":
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    proxy._count(self.command, self.path, resp.status)
                finally:
                    conn.close()

            def _body(self) -> bytes | None:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            self.rfile.readline()
                            break
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    return b"".join(chunks)
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else None

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="http-proxy", daemon=True).start()

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _decide(self, method: str, path: str) -> int | None:
        with self._lock:
            rules = list(self.rules)
        for rule in rules:
            status = rule(method, path)
            if status is not None:
                return status
        return None

    def _count(self, method: str, path: str, status: int, injected: bool = False) -> None:
        key = (method, "/" + path.lstrip("/").split("/", 2)[0], status)
        with self._lock:
            self.seen[key] += 1
            if injected:
                self.injected.append((method, path, status))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> HttpFaultProxy:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
