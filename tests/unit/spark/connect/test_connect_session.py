"""The Connect client's pieces that need no server: session settings, tags, ids, refusals, the server's
command line."""

from __future__ import annotations

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.connect.client import server_of, session_url
from airflow_tablemgmt.spark.connect.policy import connect_refusal
from airflow_tablemgmt.spark.connect.server import SERVER_CLASS, ServerSpec
from airflow_tablemgmt.spark.connect.session import connect_conf, job_tag, looks_unavailable


def _job(action: str, **options: object) -> JobSpec:
    return JobSpec(
        table={"catalog": "lake", "namespace": "db", "name": "t"},
        catalog={"name": "lake", "warehouse": "/w"},
        action=action,
        options=dict(options),
        process_id=7,
        attempt=2,
    )


def test_catalog_settings_stay_inside_the_catalog_of_the_session() -> None:
    catalog = CatalogSpec(
        name="lake", warehouse="/w", properties={"spark.hadoop.fs.x.endpoint": "v", "uri": "u"}
    )
    conf = connect_conf(catalog)
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.lake.uri"] == "u"
    assert conf["spark.sql.catalog.lake.hadoop.fs.x.endpoint"] == "v"
    assert all(k.startswith("spark.sql.catalog.lake") for k in conf)


def test_tag_url_and_server_name() -> None:
    assert job_tag(_job("rewrite-files")) == "tms-p7-a2"
    assert session_url("sc://h:1", "abc") == "sc://h:1/;session_id=abc"
    assert session_url("sc://h:1/;token=x", "abc") == "sc://h:1/;token=x;session_id=abc"
    assert server_of("sc://h:1/;token=secret") == "sc://h:1"
    assert looks_unavailable("<_MultiThreadedRendezvous ... status = StatusCode.UNAVAILABLE")


def test_refresh_and_below_floor_orphans_are_refused_naming_the_table() -> None:
    refusal = connect_refusal(_job("refresh"))
    assert refusal is not None and "lake.db.t" in refusal and "spark-submit" in refusal
    assert connect_refusal(_job("delete-orphans", **{"allow-below-floor": True})) is not None
    assert connect_refusal(_job("delete-orphans")) is None
    assert connect_refusal(_job("rewrite-files")) is None


def test_server_command_line_has_the_jars_and_no_packages() -> None:
    argv = ServerSpec(connect_jar="/j/connect.jar", jars=("/j/iceberg.jar",), port=15010).argv("spark-submit")
    assert argv[argv.index("--class") + 1] == SERVER_CLASS
    assert argv[argv.index("--jars") + 1] == "/j/connect.jar,/j/iceberg.jar"
    assert "spark.connect.grpc.binding.port=15010" in argv
    assert "--packages" not in argv


def test_a_delta_or_hudi_table_is_refused_on_connect() -> None:
    job = _job("rewrite-files")
    job.catalog["properties"] = {"tablemgmt.table-format": "delta"}
    refusal = connect_refusal(job)
    assert refusal is not None and "delta" in refusal and "spark-submit" in refusal
