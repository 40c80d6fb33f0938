"""A TCP proxy the test controls: put it between a store and PostgreSQL, then cut the route.

``cut()`` closes every open connection and answers new ones by closing them at once (the client sees
"server closed the connection unexpectedly", as after a network partition or a database restart);
``restore()`` routes again. ``hang()`` stops forwarding without closing anything (a stalled route or a
frozen peer: the client's writes are accepted by the proxy's socket, so neither TCP keepalives nor
``tcp_user_timeout`` see a problem, and a blocked query waits for an answer that does not come);
``resume()`` forwards again, what was held first. Threads, not asyncio: the code under test is
synchronous.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class TcpProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._routing = threading.Event()
        self._routing.set()
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = False
        self.refused = 0  # connections answered by a close while cut
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def cut(self) -> None:
        self._routing.clear()
        with self._lock:
            sockets, self._open = self._open, set()
        for s in sockets:
            _close(s)

    def restore(self) -> None:
        self._routing.set()

    def hang(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    @property
    def hanging(self) -> bool:
        return not self._flowing.is_set()

    def close(self) -> None:
        self._closed = True
        self._flowing.set()
        self.cut()
        _close(self._listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._routing.is_set():
                self.refused += 1
                _close(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._open.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self._flowing.wait()  # hung: hold the bytes, close nothing
                if not self._routing.is_set():
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with self._lock:
                    self._open.discard(s)
                _close(s)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()
