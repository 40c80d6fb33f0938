"""One catalog's storage settings, rendered for Spark and for pyiceberg, read back the same."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.secrets import is_sensitive
from airflow_tablemgmt.core.storage import (
    S3_FILE_IO,
    pyiceberg_properties,
    spark_properties,
    storage_of,
    storage_of_pyiceberg,
)

DECLARED = [
    (
        "s3://wh/w",
        {
            "s3.endpoint": "http://127.0.0.1:9000",
            "client.region": "eu-west-1",
            "s3.access-key-id": "env:K",
            "s3.secret-access-key": "env:S",
        },
    ),
    (
        "s3://wh/w",
        {"s3.endpoint": "https://minio:9000", "s3.path-style-access": "false", "s3.region": "us-east-1"},
    ),
    (None, {"uri": "http://rest", "warehouse": "s3a://b/w", "s3.session-token": "conn:aws.password"}),
    ("/data/wh", {}),
    ("gs://b/w", {"gcs.project-id": "p"}),
]


@pytest.mark.parametrize(("warehouse", "properties"), DECLARED)
def test_both_sides_render_the_same_storage_settings(
    warehouse: str | None, properties: dict[str, str]
) -> None:
    spark = spark_properties(warehouse, properties)
    py = pyiceberg_properties(warehouse, properties)
    assert storage_of(spark) == storage_of_pyiceberg(py)
    assert not [k for k in py if k in ("io-impl", "catalog-impl") or k.startswith("spark.")]


def test_s3_gets_s3fileio_and_path_style_with_a_custom_endpoint_unless_declared() -> None:
    spark = spark_properties("s3://b/w", {"s3.endpoint": "http://h:1"})
    assert spark["io-impl"] == S3_FILE_IO and spark["s3.path-style-access"] == "true"
    assert (
        pyiceberg_properties("s3://b/w", {"s3.endpoint": "http://h:1"})["s3.force-virtual-addressing"]
        == "false"
    )
    virtual = spark_properties("s3://b/w", {"s3.endpoint": "http://h:1", "s3.path-style-access": "false"})
    assert virtual["s3.path-style-access"] == "false"
    assert spark_properties("s3://b/w", {"io-impl": "x.MyIO"})["io-impl"] == "x.MyIO"
    assert "io-impl" not in spark_properties("/data/wh", {})


@pytest.mark.parametrize(
    ("warehouse", "file_io"),
    [
        ("gs://bucket/wh", "org.apache.iceberg.gcp.gcs.GCSFileIO"),
        ("abfss://c@acct.dfs.core.windows.net/wh", "org.apache.iceberg.azure.adlsv2.ADLSFileIO"),
        ("ABFS://c@acct.dfs.core.windows.net/wh", "org.apache.iceberg.azure.adlsv2.ADLSFileIO"),
    ],
)
def test_gcs_and_adls_get_icebergs_own_file_io_unless_one_is_named(warehouse: str, file_io: str) -> None:
    assert spark_properties(warehouse, {})["io-impl"] == file_io
    assert spark_properties(warehouse, {"io-impl": "x.MyIO"})["io-impl"] == "x.MyIO"
    assert "io-impl" not in pyiceberg_properties(warehouse, {})  # a Java class name: the JVM's only


@pytest.mark.parametrize(
    ("key", "sensitive"),
    [
        ("header.X-Iceberg-Access-Delegation", False),
        ("client.credentials-provider", False),
        ("s3.sse-kms-key-id", False),
        ("token-refresh-enabled", False),
        ("gcs.oauth2.token-expires-at", False),
        ("gcs.oauth2.token", True),
        ("s3.endpoint", False),
        ("client.region", False),
        ("header.Authorization", True),
        ("header.x-api", True),
        ("credential", True),
        ("token", True),
        ("s3.access-key-id", True),
        ("s3.secret-access-key", True),
        ("s3.sse.key", True),  # SSE-C: the customer's key itself
        ("client.credentials-provider.secret", True),
        ("jdbc.password", True),
    ],
)
def test_which_properties_are_secrets(key: str, sensitive: bool) -> None:
    assert is_sensitive(key) is sensitive
