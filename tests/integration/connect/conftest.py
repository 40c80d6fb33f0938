"""One real Spark Connect server per test module (``server.py``), stopped at the module's end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.connect.server import ConnectServer, start_connect_server


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    server = start_connect_server(tmp_path_factory.mktemp("connect") / "server.log")
    try:
        yield server
    finally:
        server.stop()
