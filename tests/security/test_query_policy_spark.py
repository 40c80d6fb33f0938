"""The plan check of a dynamic table's query in the real refresh job (``spark/job/refresh.py`` through
``job_main.run``, in-process Spark with the Iceberg catalog ``lake``): each vector of issue 22 is refused
from Spark's plans before anything of the query runs, the refusal names what was found, and the result
line (what becomes the process row) never carries a value the query could have computed.

The canary is the driver JVM's own ``JAVA_HOME`` (set before the session started): a query that ran
``java_method('java.lang.System', 'getenv', 'JAVA_HOME')`` inside ``raise_error`` put it into Spark's
error text, which the old job returned as the failure reason.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.job.main import run
from tests.integration.spark.conftest import CATALOG, NAMESPACE
from tests.integration.spark.spark_tables import TableFactory, Tables, job_spec

pytestmark = pytest.mark.integration

_names = itertools.count()


def _dynamic_table() -> TableIdentifier:
    return TableIdentifier(CATALOG, NAMESPACE, f"sec_dt_{next(_names)}")


def _create(tables: Tables, catalog: CatalogSpec, query: str, **options: Any) -> tuple[int, dict[str, Any]]:
    """Run the creation job of a new dynamic table from ``query``: (exit code, the result line)."""
    table = _dynamic_table()
    spec = job_spec(table, catalog, "refresh", {"mode": "create", "query": query, **options})
    code, line = run(spec, tables.spark)
    result = json.loads(line)
    assert not tables.spark.catalog.tableExists(str(table)) or code == 0
    return code, result


def _canary() -> str:
    value = os.environ["JAVA_HOME"]  # the in-process driver's environment, read by the JVM at start
    assert len(value) > 3
    return value


def _refused(code: int, result: dict[str, Any], *needles: str) -> str:
    assert code == 1, result
    assert result["error_class"] == "QueryNotAllowed", result
    error = str(result["error"])
    for needle in needles:
        assert needle in error, error
    assert _canary() not in json.dumps(result)
    return error


@pytest.mark.parametrize(
    "call",
    [
        "java_method('java.lang.System', 'getenv', 'JAVA_HOME')",
        "reflect('java.lang.System', 'getenv', 'JAVA_HOME')",
    ],
)
def test_reflection_inside_raise_error_is_refused_before_it_runs(
    tables: Tables, catalog: CatalogSpec, call: str
) -> None:
    code, result = _create(tables, catalog, f"SELECT CAST(raise_error({call}) AS STRING) AS x")
    _refused(code, result, "reflection")


def test_reflection_in_a_subquery_and_a_cte_is_refused(
    tables: Tables, catalog: CatalogSpec, make_table: TableFactory
) -> None:
    src = make_table("id bigint, v string", prefix="sec_src")
    tables.spark.sql(f"INSERT INTO {src.quoted} VALUES (1, 'a')")
    query = (
        f"WITH c AS (SELECT id FROM {src} WHERE v = (SELECT java_method('java.lang.System', 'getenv', "
        "'JAVA_HOME'))) SELECT id FROM c"
    )
    _refused(*_create(tables, catalog, query), "reflection")


def test_sql_on_files_is_refused_and_switched_off(
    tables: Tables, catalog: CatalogSpec, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("file-canary-7f3a\n")
    code, result = _create(tables, catalog, f"SELECT value FROM text.`{secret}`")
    assert code == 1, result
    assert "file-canary-7f3a" not in json.dumps(result)
    # The refresh job's session has SQL on files off, so the path resolves to nothing at all.
    assert result["error_class"] in ("InvalidQuery", "QueryNotAllowed"), result
    spark = tables.spark
    # With SQL on files left on (a shared session), the plan check alone refuses it.
    from airflow_tablemgmt.spark.errors import QueryNotAllowed
    from airflow_tablemgmt.spark.job.query_policy import check_plan

    df = spark.sql(f"SELECT value FROM text.`{secret}`")
    with pytest.raises(QueryNotAllowed, match="reads files directly"):
        check_plan(df, frozenset({CATALOG}))


def test_add_jar_is_refused_as_a_command(tables: Tables, catalog: CatalogSpec, tmp_path: Path) -> None:
    jar = tmp_path / "evil.jar"
    jar.write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    jars_before = tables.spark.sparkContext._jsc.sc().listJars().size()  # noqa: SLF001
    error = _refused(*_create(tables, catalog, f"ADD JAR {jar}"), "command, not a query")
    assert "AddJarsCommand" in error
    assert tables.spark.sparkContext._jsc.sc().listJars().size() == jars_before  # noqa: SLF001


def test_create_function_is_refused_as_a_command(tables: Tables, catalog: CatalogSpec) -> None:
    code, result = _create(
        tables, catalog, "CREATE TEMPORARY FUNCTION sec_fn AS 'org.apache.hadoop.hive.ql.udf.UDFOPNegative'"
    )
    _refused(code, result, "command, not a query")
    assert "sec_fn" not in {f.name for f in tables.spark.catalog.listFunctions()}


def test_a_command_that_is_not_a_query_is_refused(tables: Tables, catalog: CatalogSpec) -> None:
    spark = tables.spark
    spark.sql(f"CREATE TABLE IF NOT EXISTS {CATALOG}.{NAMESPACE}.sec_victim (id bigint) USING iceberg")
    _refused(*_create(tables, catalog, f"DROP TABLE {CATALOG}.{NAMESPACE}.sec_victim"), "command")
    assert spark.catalog.tableExists(f"{CATALOG}.{NAMESPACE}.sec_victim")
    _refused(*_create(tables, catalog, "SET spark.sql.runSQLOnFiles=true"), "command")


def test_a_table_of_an_unregistered_catalog_is_refused(tables: Tables, catalog: CatalogSpec) -> None:
    spark = tables.spark
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW sec_session_view AS SELECT 1 AS id")
    spark.sql("CREATE TABLE IF NOT EXISTS default.sec_session_table (id INT) USING parquet")
    try:
        for query in (
            "SELECT id FROM default.sec_session_table",
            "SELECT id FROM spark_catalog.default.sec_session_table",
        ):
            _refused(*_create(tables, catalog, query), "not a table of a registered catalog")
    finally:
        spark.sql("DROP TABLE IF EXISTS default.sec_session_table")


def test_a_dynamic_option_that_widens_the_session_is_refused(tables: Tables, catalog: CatalogSpec) -> None:
    code, result = _create(
        tables,
        catalog,
        "SELECT 1 AS id",
        dynamic_options={"spark.sql.catalog.evil": "org.apache.iceberg.spark.SparkCatalog"},
    )
    assert code == 1 and result["error_class"] == "InvalidJobSpec", result
    assert "spark.sql.catalog" in result["error"]


def test_a_runtime_failure_is_reported_without_sparks_text(tables: Tables, catalog: CatalogSpec) -> None:
    code, result = _create(tables, catalog, "SELECT CAST(raise_error('runtime-canary-91c2') AS STRING) AS x")
    assert code == 1, result
    assert result["error_class"] == "QueryFailed", result
    assert "runtime-canary-91c2" not in json.dumps(result)
    assert "task" in result["error"]


def test_a_plain_query_of_the_registered_catalog_still_creates_the_table(
    tables: Tables, catalog: CatalogSpec, make_table: TableFactory
) -> None:
    src = make_table("id bigint, v string", prefix="sec_ok")
    tables.spark.sql(f"INSERT INTO {src.quoted} VALUES (1, 'a'), (2, 'b')")
    query = f"WITH c AS (SELECT * FROM {src}) SELECT v, count(*) AS n FROM c WHERE id IN (SELECT id FROM {src}) GROUP BY v UNION ALL SELECT 'z', 0L FROM range(1)"
    code, result = _create(tables, catalog, query, timeout_seconds=600)  # within its wall clock
    assert code == 0, result
    assert result["summary"]["rows_written"] == 3
    assert (
        tables.spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
    )  # the clock's group is gone
