"""SeaweedFS started on a port another process took between its choice and the server's bind (CI saw
``Port allocation failed: port … for Master … is not available``): the start is tried again on new ports."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.integration.iceberg_session import skip_unless_ci
from tests.support import servers


def test_a_port_taken_before_the_bind_is_chosen_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    real = servers.free_ports
    chosen: list[list[int]] = []

    def ports(n: int) -> list[int]:
        out = real(n)
        if not chosen:
            out[2] = taken  # the master's port, as in CI's failure
        chosen.append(out)
        return out

    monkeypatch.setattr(servers, "free_ports", ports)
    try:
        server = servers.SeaweedS3(tmp_path).start()
    except RuntimeError as e:
        held.close()
        if "not installed" in str(e):
            skip_unless_ci(f"SeaweedFS could not start: {e}")
        raise
    try:
        assert len(chosen) == 2 and chosen[0][2] == taken and taken not in chosen[1]
        assert server.port == chosen[1][0]
        fs = server.filesystem()
        with fs.open_output_stream(f"{server.bucket}/probe.txt") as out:
            out.write(b"ok")
        with fs.open_input_stream(f"{server.bucket}/probe.txt") as src:
            assert src.read() == b"ok"
    finally:
        server.stop()
        held.close()


def test_only_a_taken_port_is_tried_again() -> None:
    assert servers.port_taken(
        "server exited with 1: E1129 mini.go:1244 Port allocation failed: port 42685 for Master "
        "(specified by flag master.port) is not available on 127.0.0.1 and cannot be used"
    )
    assert servers.port_taken("listen tcp 127.0.0.1:8333: bind: address already in use")
    assert not servers.port_taken("server exited with 1: open /data: permission denied")
