"""A Spark Connect session's SQL configuration, read and set in one gRPC ``Config`` request each: what the
job's driver code (``spark/job``) and the Connect engine both use, so the driver imports this leaf module and
never the engine's session (``spark/connect/session.py`` runs the job: the driver contract forbids the way
back)."""

from __future__ import annotations

from typing import Any

#: Where a client keeps the settings :func:`conf_with_prefix` read (``reuse``), by prefix.
_READ = "_tablemgmt_conf_read"


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


def conf_with_prefix(session: Any, prefix: str, *, reuse: bool = False) -> list[tuple[str, str]]:
    """The remote ``session``'s settings whose keys start with ``prefix``, in one gRPC ``Config`` request
    (``GetAll``): no SQL command, no plan on the server, values as set (``SET`` would redact secrets).
    The server answers the keys without the prefix; they are given back whole.

    ``reuse``: the answer of an earlier read of ``prefix`` on this session, when no value under it was set
    differently or unset through this client since (a batch's kept session, whose catalog settings each job
    sets again, the same: one request fewer a job). Every ``Config`` request of the client is watched for
    that (``spark.conf.set`` included); a change made through another client of the same server-side
    session is not seen."""
    import pyspark.sql.connect.proto as proto

    client = session.client
    read: dict[str, dict[str, str]] = getattr(client, _READ, None) or {}
    if reuse and prefix in read:
        return list(read[prefix].items())
    op = proto.ConfigRequest.Operation(get_all=proto.ConfigRequest.GetAll(prefix=prefix))
    pairs = [(prefix + k, v) for k, v in client.config(op).pairs if v is not None]
    if reuse:
        _watch_changes(client)
        read[prefix] = dict(pairs)
        setattr(client, _READ, read)
    return pairs


def _watch_changes(client: Any) -> None:
    """Wrap ``client.config`` (once): a ``set`` or ``unset`` that changes a value under a prefix read with
    ``reuse`` drops that answer, so the next read asks the server."""
    if getattr(client, _READ, None) is not None:
        return
    inner = client.config

    def config(op: Any) -> Any:
        result = inner(op)
        kind = op.WhichOneof("op_type")
        read: dict[str, dict[str, str]] = getattr(client, _READ, None) or {}
        if read and kind in ("set", "unset"):
            changed = (
                {p.key: p.value for p in op.set.pairs} if kind == "set" else dict.fromkeys(op.unset.keys)
            )
            for prefix, known in list(read.items()):
                if any(k.startswith(prefix) and known.get(k) != v for k, v in changed.items()):
                    del read[prefix]
        return result

    client.config = config


__all__ = ["conf_with_prefix", "set_client_conf", "set_conf"]
