"""core.uri_credentials: credentials inside a catalog URI are found (user-info passwords, sensitive query
and ';' parameters), redacted for display and refused when a catalog is written (issue 22, item 4)."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import CatalogSpec, parse_catalog
from airflow_tablemgmt.core.uri_credentials import redact_uri, uri_credential

LEAKY = [
    ("jdbc:postgresql://pg/cat?user=u&password=S3CRET", "jdbc:postgresql://pg/cat?user=u&password=***"),
    ("http://u:pw@host:8181/api", "http://u:***@host:8181/api"),
    ("s3a://AK:SK@bucket/warehouse", "s3a://AK:***@bucket/warehouse"),
    (
        "jdbc:sqlserver://h:1433;user=u;password=S3CRET;db=x",
        "jdbc:sqlserver://h:1433;user=u;password=***;db=x",
    ),
    ("https://catalog/api?token=abc&x=1", "https://catalog/api?token=***&x=1"),
    ("jdbc:mysql://u:p%40ss@db/cat", "jdbc:mysql://u:***@db/cat"),
]
CLEAN = [
    "jdbc:postgresql://pg/cat?user=u",
    "hdfs://user@namenode:8020/warehouse",
    "s3://bucket/warehouse",
    "/data/warehouse",
    "thrift://metastore:9083",
    "conn:pg_catalog",
    "env:CATALOG_URI",
    "https://catalog/api?keyspace=",
]


@pytest.mark.parametrize(("uri", "redacted"), LEAKY)
def test_credentials_are_found_and_redacted(uri: str, redacted: str) -> None:
    found = uri_credential(uri)
    assert found is not None
    assert "S3CRET" not in found and "pw" not in found.replace("password", "")
    assert redact_uri(uri) == redacted


@pytest.mark.parametrize("uri", CLEAN)
def test_a_uri_without_credentials_is_left_alone(uri: str) -> None:
    assert uri_credential(uri) is None
    assert redact_uri(uri) == uri


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": "c", "type": "jdbc", "properties": {"uri": LEAKY[0][0]}}, "properties.uri"),
        ({"name": "c", "type": "rest", "properties": {"uri": LEAKY[1][0]}}, "properties.uri"),
        ({"name": "c", "type": "glue", "warehouse": LEAKY[2][0]}, "warehouse"),
        (
            {"name": "c", "warehouse": "/w", "properties": {"s3.endpoint": "http://a:b@minio:9000"}},
            "properties.s3.endpoint",
        ),
    ],
)
def test_a_catalog_written_with_one_is_refused_saying_how_to_pass_it(data: dict, field: str) -> None:
    with pytest.raises(InvalidDeclaration) as e:
        parse_catalog(data, "catalog c")
    message = str(e.value)
    assert field in message and "credential" in message, message
    assert "conn:" in message and "var:" in message and "env:" in message, message
    for secret in ("S3CRET", ":pw@", "AK:SK", "a:b@"):
        assert secret not in message, message


def test_a_row_written_before_the_rule_still_loads() -> None:
    spec = CatalogSpec.model_validate({"name": "c", "type": "jdbc", "properties": {"uri": LEAKY[0][0]}})
    assert spec.properties["uri"] == LEAKY[0][0]  # the worker still reaches it; only display redacts
