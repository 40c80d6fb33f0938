"""``spark/connect/config.py``'s reads and sets through a real pyspark ``ConfigRequest``, on a client that
answers as a Connect server's ``Config`` does: a kept session's catalog settings are read once until one of
them is set differently (issue 40: one request fewer a job, never a stale answer after a change)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from airflow_tablemgmt.spark.connect.client import import_client
from airflow_tablemgmt.spark.connect.config import conf_with_prefix, set_conf

PREFIX = "spark.sql.catalog.lake"


class _Client:
    """The server's side of ``Config``: ``set`` and ``get_all`` on one session's settings."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.settings = dict(settings)
        self.requests: list[str] = []

    def config(self, op: Any) -> Any:
        kind = op.WhichOneof("op_type")
        self.requests.append(kind)
        if kind == "set":
            self.settings.update({p.key: p.value for p in op.set.pairs})
            return SimpleNamespace(pairs=[])
        if kind == "unset":
            for key in op.unset.keys:
                self.settings.pop(key, None)
            return SimpleNamespace(pairs=[])
        prefix = op.get_all.prefix
        pairs = [(k[len(prefix) :], v) for k, v in self.settings.items() if k.startswith(prefix)]
        return SimpleNamespace(pairs=pairs)


def _session(settings: dict[str, str]) -> Any:
    import_client()
    return SimpleNamespace(client=_Client(settings))


def test_a_reused_read_asks_once_until_a_value_under_its_prefix_changes() -> None:
    launch = {PREFIX: "org.apache.iceberg.spark.SparkCatalog", f"{PREFIX}.io-impl": "x.IO"}
    session = _session(launch)
    job = {PREFIX: "org.apache.iceberg.spark.SparkCatalog", f"{PREFIX}.warehouse": "/wh"}
    set_conf(session, job)
    first = conf_with_prefix(session, PREFIX, reuse=True)
    set_conf(session, {**job, "spark.tablemgmt.operations": "op-2"})  # the next job: the same catalog
    second = conf_with_prefix(session, PREFIX, reuse=True)
    assert first == second and dict(first)[f"{PREFIX}.io-impl"] == "x.IO"
    assert session.client.requests == ["set", "get_all", "set"]

    set_conf(session, {**job, f"{PREFIX}.warehouse": "/other"})  # changed: asked again
    third = dict(conf_with_prefix(session, PREFIX, reuse=True))
    assert third[f"{PREFIX}.warehouse"] == "/other"
    assert session.client.requests[-2:] == ["set", "get_all"]


def test_a_read_without_reuse_always_asks() -> None:
    session = _session({PREFIX: "c"})
    conf_with_prefix(session, PREFIX)
    conf_with_prefix(session, PREFIX)
    assert session.client.requests == ["get_all", "get_all"]


def test_a_change_through_any_config_request_of_the_client_is_read_again() -> None:
    """``spark.conf.set`` / ``unset`` send their own ``Config`` requests (not :func:`set_conf`): seen too."""
    import pyspark.sql.connect.proto as proto

    session = _session({PREFIX: "c", f"{PREFIX}.warehouse": "/wh"})
    conf_with_prefix(session, PREFIX, reuse=True)
    pair = proto.KeyValue(key=f"{PREFIX}.cache-enabled", value="true")
    session.client.config(proto.ConfigRequest.Operation(set=proto.ConfigRequest.Set(pairs=[pair])))
    assert dict(conf_with_prefix(session, PREFIX, reuse=True))[f"{PREFIX}.cache-enabled"] == "true"
    unset = proto.ConfigRequest.Unset(keys=[f"{PREFIX}.warehouse"])
    session.client.config(proto.ConfigRequest.Operation(unset=unset))
    assert f"{PREFIX}.warehouse" not in dict(conf_with_prefix(session, PREFIX, reuse=True))
    assert session.client.requests.count("get_all") == 3
