"""metadata/table_dir.py: the S3A settings a path-based table is read with, and where a table can be read."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.table_dir import open_table_dir, s3a_access

P = "spark.hadoop.fs.s3a."


def test_the_s3a_settings_as_the_spark_job_reads_them() -> None:
    access = s3a_access(
        {
            f"{P}endpoint": "http://127.0.0.1:8333/",
            f"{P}access.key": "AKIA-canary",
            f"{P}secret.key": "secret-canary",
            f"{P}path.style.access": "true",
            f"{P}endpoint.region": "eu-west-1",
        }
    )
    assert (access.endpoint, access.scheme, access.region, access.path_style) == (
        "127.0.0.1:8333",
        "http",
        "eu-west-1",
        True,
    )
    assert "canary" not in repr(access) and access.secrets() == ("AKIA-canary", "secret-canary")


def test_ssl_off_means_http_and_a_bucket_s_own_settings_win() -> None:
    props = {
        f"{P}endpoint": "minio:9000",
        f"{P}connection.ssl.enabled": "false",
        f"{P}bucket.special.endpoint": "https://special.example:443",
        f"{P}region": "us-west-2",
    }
    assert (s3a_access(props, "lake").endpoint, s3a_access(props, "lake").scheme) == ("minio:9000", "http")
    special = s3a_access(props, "special")
    assert (special.endpoint, special.scheme, special.region) == ("special.example:443", "https", "us-west-2")
    assert s3a_access({}).scheme == "https" and s3a_access({}).where() == "AWS S3"


def test_an_unresolved_secret_reference_is_refused_not_sent() -> None:
    with pytest.raises(
        HealthUnavailable, match=r"properties.spark.hadoop.fs.s3a.secret.key: 'env:S3_SECRET'"
    ):
        s3a_access({f"{P}secret.key": "env:S3_SECRET"})


def test_where_a_table_can_be_read(tmp_path: Path) -> None:
    (tmp_path / "t" / "_delta_log").mkdir(parents=True)
    (tmp_path / "t" / "_delta_log" / "x.json").write_text("{}")
    table = open_table_dir(f"file://{tmp_path}/t")
    assert [(e.name, e.size, e.is_dir) for e in table.list("_delta_log")] == [("x.json", 2, False)]
    assert table.read_text("_delta_log/x.json") == "{}"
    with pytest.raises(HealthUnavailable, match="none were given"):
        open_table_dir("s3a://bucket/t")
    with pytest.raises(HealthUnavailable, match=r"gs://b/t: only local and S3 \(s3a://, s3://\) tables"):
        open_table_dir("gs://b/t", {})
