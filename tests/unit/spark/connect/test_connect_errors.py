"""A Spark Connect failure is recorded as its gRPC status and the server's message, not gRPC's repr
(issue 37, item 7): a real failed gRPC call (no server on the port), as an exception and as the text the job
protocol made of it."""

from __future__ import annotations

import socket

import grpc
import pytest

from airflow_tablemgmt.spark.connect.errors import REASON_CHARS, connect_reason, is_grpc_repr
from airflow_tablemgmt.spark.protocol import describe_exception


@pytest.fixture(scope="module")
def refused() -> grpc.RpcError:
    """What pyspark's client meets when the server is gone: a call to a port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: a refused connection
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        channel.unary_unary("/spark.connect.SparkConnectService/Config")(b"", timeout=10)
    except grpc.RpcError as e:
        return e
    finally:
        channel.close()
    raise AssertionError("a call to a closed port succeeded")


def test_a_refused_call_is_its_status_and_the_servers_message(refused: grpc.RpcError) -> None:
    raw = str(refused)
    assert len(raw) > 300 and raw.startswith("<_InactiveRpcError")  # what the reason used to carry
    reason = connect_reason(refused)
    assert reason.startswith("UNAVAILABLE: failed to connect to all addresses"), reason
    assert "Connection refused" in reason
    assert "\n" not in reason and "debug_error_string" not in reason and "<_" not in reason
    assert len(reason) < len(raw) / 2


def test_the_job_protocols_text_of_it_gives_the_same_reason(refused: grpc.RpcError) -> None:
    _, message = describe_exception(refused)  # what a job's result line carries
    assert is_grpc_repr(message)
    assert connect_reason(message) == connect_reason(refused)


def test_a_plain_message_keeps_its_first_line_and_a_long_one_is_cut() -> None:
    text = "[TABLE_OR_VIEW_NOT_FOUND] The table `lake`.`db`.`t` cannot be found.\n\tat org.apache.spark..."
    assert not is_grpc_repr(text)
    assert connect_reason(text) == "[TABLE_OR_VIEW_NOT_FOUND] The table `lake`.`db`.`t` cannot be found."
    long = connect_reason('status = StatusCode.INTERNAL\n details = "' + "x" * 1000 + '"')
    assert long.startswith("INTERNAL: xxx") and len(long) == REASON_CHARS and long.endswith("…")


def test_the_health_probe_reports_a_server_that_does_not_answer(capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_tablemgmt.spark.connect.probe import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main([f"sc://127.0.0.1:{port}", "--timeout", "5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"sc://127.0.0.1:{port} does not answer: UNAVAILABLE: "), err
