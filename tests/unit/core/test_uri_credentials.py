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
    # issue 35: the forms the first rule missed
    ("jdbc:oracle:thin:u/S3CRET@host:1521/db", "jdbc:oracle:thin:u/***@host:1521/db"),
    ("jdbc:oracle:thin:u/S3CRET@//host:1521/svc", "jdbc:oracle:thin:u/***@//host:1521/svc"),
    ("jdbc:oracle:oci:u/S3CRET@(DESCRIPTION=(HOST=h))", "jdbc:oracle:oci:u/***@(DESCRIPTION=(HOST=h))"),
    ("mssql://h/db?user=u&pwd=S3CRET", "mssql://h/db?user=u&pwd=***"),
    ("jdbc:sqlserver://h;user=u;PWD=S3CRET", "jdbc:sqlserver://h;user=u;PWD=***"),
    ("jdbc:sqlserver://h;user=u;Password=S3CRET", "jdbc:sqlserver://h;user=u;Password=***"),
    ("jdbc:redshift://h:5439/db;UID=u;PWD=S3CRET", "jdbc:redshift://h:5439/db;UID=u;PWD=***"),
    ("jdbc:db2://h:50000/db:user=u;password=S3CRET;", "jdbc:db2://h:50000/db:user=u;password=***;"),
    (
        "jdbc:snowflake://a.snowflakecomputing.com/?user=u&passcode=S3CRET",
        "jdbc:snowflake://a.snowflakecomputing.com/?user=u&passcode=***",
    ),
    (
        "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=S3CRET;EndpointSuffix=core.windows.net",
        "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=***;EndpointSuffix=core.windows.net",
    ),
    ("Server=h;Database=d;User Id=u;Password=S3CRET;", "Server=h;Database=d;User Id=u;Password=***;"),
    (
        "https://acct.blob.core.windows.net/c?sv=2022&sig=S3CRET",
        "https://acct.blob.core.windows.net/c?sv=2022&sig=***",
    ),
    (
        "abfss://c@acct.dfs.core.windows.net/w?sv=1&sig=S3CRET",
        "abfss://c@acct.dfs.core.windows.net/w?sv=1&sig=***",
    ),
    (
        "https://b.s3.amazonaws.com/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=S3CRET",
        "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***",
    ),
    (
        "https://storage.googleapis.com/b/k?X-Goog-Signature=S3CRET",
        "https://storage.googleapis.com/b/k?X-Goog-Signature=***",
    ),
    ("https://h/api?access_token=S3CRET", "https://h/api?access_token=***"),
    ("https://h/api?apikey=S3CRET&q=1", "https://h/api?apikey=***&q=1"),
    ("https://h/api?secret=S3CRET", "https://h/api?secret=***"),
    ("https://h/api?auth=S3CRET", "https://h/api?auth=***"),
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
    "jdbc:oracle:thin:@//host:1521/svc",
    "jdbc:h2:mem:test;MODE=PostgreSQL",
    "jdbc:sqlserver://h:1433;databaseName=d;encrypt=true",
    "DefaultEndpointsProtocol=https;AccountName=a;EndpointSuffix=core.windows.net",
    "s3://bucket/part=a;b=c",
    "https://h:8443/api?x=1",
]


@pytest.mark.parametrize(("uri", "redacted"), LEAKY)
def test_credentials_are_found_and_redacted(uri: str, redacted: str) -> None:
    found = uri_credential(uri)
    assert found is not None
    assert "S3CRET" not in found and "u:pw" not in found
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
