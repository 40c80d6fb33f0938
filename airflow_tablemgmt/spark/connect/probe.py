"""``python -m airflow_tablemgmt.spark.connect.probe [sc://host:port] [--timeout S]``: is a Spark Connect
server answering? The health check of a supervised server (docs/spark-connect.md, "In production").

One ``AnalyzePlan(SparkVersion)`` call with a deadline, straight over gRPC: no session is kept and nothing
runs on the server. pyspark's own client would retry an unreachable server with back-off for minutes, which
is what a task wants and a health check must not do. Exit 0 printing the server's Spark version, or 1 with
the reason (``UNAVAILABLE: …``, ``DEADLINE_EXCEEDED: …``: :func:`~.errors.connect_reason`). TLS and the token
of ``sc://…/;use_ssl=true;token=…`` are honoured.
"""

from __future__ import annotations

import argparse
import sys
import uuid


def probe(url: str, timeout: float = 10.0) -> str:
    """The server's Spark version; raises ``grpc.RpcError`` when it does not answer within ``timeout``."""
    import grpc
    import pyspark.sql.connect.proto as pb
    from pyspark.sql.connect.proto import base_pb2_grpc

    address, _, params = url.removeprefix("sc://").partition("/;")
    if ":" not in address:
        address += ":15002"
    options = dict(p.split("=", 1) for p in params.split(";") if "=" in p)
    if options.get("use_ssl", "").lower() == "true" or "token" in options:
        credentials = grpc.ssl_channel_credentials()
        if "token" in options:
            credentials = grpc.composite_channel_credentials(
                credentials, grpc.access_token_call_credentials(options["token"])
            )
        channel = grpc.secure_channel(address, credentials)
    else:
        channel = grpc.insecure_channel(address)
    try:
        request = pb.AnalyzePlanRequest(
            session_id=str(uuid.uuid4()),
            user_context=pb.UserContext(user_id=options.get("user_id", "tablemgmt-probe")),
            spark_version=pb.AnalyzePlanRequest.SparkVersion(),
        )
        answer = base_pb2_grpc.SparkConnectServiceStub(channel).AnalyzePlan(request, timeout=timeout)
        return str(answer.spark_version.version)
    finally:
        channel.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "url", nargs="?", default="sc://127.0.0.1:15002", help="the server (default %(default)s)"
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds (default %(default)s)")
    args = parser.parse_args(argv)
    import grpc

    from airflow_tablemgmt.spark.connect.client import server_of
    from airflow_tablemgmt.spark.connect.errors import connect_reason

    try:
        version = probe(args.url, args.timeout)
    except grpc.RpcError as e:
        print(f"{server_of(args.url)} does not answer: {connect_reason(e)}", file=sys.stderr)
        return 1
    print(f"{server_of(args.url)} answers: Spark {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
