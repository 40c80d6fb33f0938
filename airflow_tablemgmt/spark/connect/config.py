"""A Spark Connect session's SQL configuration, read and set in one gRPC ``Config`` request each: what the
job's driver code (``spark/job``) and the Connect engine both use, so the driver imports this leaf module and
never the engine's session (``spark/connect/session.py`` runs the job: the driver contract forbids the way
back)."""

from __future__ import annotations

from typing import Any


def set_conf(session: Any, conf: dict[str, str]) -> None:
    """Set ``conf`` on the remote ``session`` in one gRPC ``Config`` request (``spark.conf.set`` sends one
    per key)."""
    set_client_conf(session.client, conf)


def set_client_conf(client: Any, conf: dict[str, str]) -> None:
    """:func:`set_conf` through the session's ``client`` (``SparkConnectClient``)."""
    if not conf:
        return
    import pyspark.sql.connect.proto as proto

    pairs = [proto.KeyValue(key=k, value=v) for k, v in conf.items()]
    client.config(proto.ConfigRequest.Operation(set=proto.ConfigRequest.Set(pairs=pairs)))


def conf_with_prefix(session: Any, prefix: str) -> list[tuple[str, str]]:
    """The remote ``session``'s settings whose keys start with ``prefix``, in one gRPC ``Config`` request
    (``GetAll``): no SQL command, no plan on the server, values as set (``SET`` would redact secrets).
    The server answers the keys without the prefix; they are given back whole."""
    import pyspark.sql.connect.proto as proto

    op = proto.ConfigRequest.Operation(get_all=proto.ConfigRequest.GetAll(prefix=prefix))
    return [(prefix + k, v) for k, v in session.client.config(op).pairs if v is not None]


__all__ = ["conf_with_prefix", "set_client_conf", "set_conf"]
