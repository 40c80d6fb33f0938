"""The plan check is an allow-list (issue 35): through the real refresh job (``job_main.run``, the
in-process Spark session with the Iceberg catalog ``lake``), every spelling of a script transformation
— which Spark >= 3.1 runs with ``/bin/bash -c`` on the Spark host, no Hive needed — is refused before
anything runs, and Spark's variable substitution is off in the refresh's session. Every legitimate query
shape a dynamic table uses (joins, windows, grouping sets, pivots, lateral views, subqueries, lambdas,
hints, the refresh's own partition filter …) still passes.

The canary for the script: ``USING 'touch <marker>; cat'`` leaves the marker file on the host if the
script ever ran (on the code before the allow-list each spelling created the table and the marker).
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
from airflow_tablemgmt.spark.job.query_policy import check_plan
from tests.integration.spark.conftest import CATALOG, NAMESPACE
from tests.integration.spark.spark_tables import TableFactory, Tables, job_spec

pytestmark = pytest.mark.integration

_names = itertools.count()

SCRIPT_SPELLINGS = {
    "select-transform": "SELECT TRANSFORM(v) USING '{script}' AS (x) FROM {src}",
    "transform-in-a-cte": "WITH c AS (SELECT TRANSFORM(v) USING '{script}' AS (x) FROM {src}) SELECT x FROM c",
    "transform-without-from": "SELECT TRANSFORM('a') USING '{script}' AS (x)",
    "transform-in-a-subquery": "SELECT x FROM {src} JOIN (SELECT TRANSFORM(v) USING '{script}' AS (x) FROM {src}) s ON s.x = v",
    "from-map": "FROM {src} MAP v USING '{script}' AS (x)",
    "from-reduce": "FROM {src} REDUCE v USING '{script}' AS (x)",
    "map-then-from": "MAP v USING '{script}' AS (x) FROM {src}",
    "reduce-without-from": "REDUCE 'a' USING '{script}' AS (x)",
}


def _table() -> TableIdentifier:
    return TableIdentifier(CATALOG, NAMESPACE, f"sec_al_{next(_names)}")


def _create(
    tables: Tables, catalog: CatalogSpec, table: TableIdentifier, query: str
) -> tuple[int, dict[str, Any]]:
    spec = job_spec(table, catalog, "refresh", {"mode": "create", "query": query})
    code, line = run(spec, tables.spark)
    return code, json.loads(line)


@pytest.fixture(scope="module")
def source(spark: Any) -> TableIdentifier:
    table = TableIdentifier(CATALOG, NAMESPACE, "sec_al_src")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table.quoted} (id bigint, v string) USING iceberg")
    spark.sql(f"INSERT INTO {table.quoted} VALUES (1, 'a'), (2, 'b')")
    return table


@pytest.mark.parametrize("spelling", sorted(SCRIPT_SPELLINGS))
def test_every_spelling_of_a_script_transformation_is_refused_before_it_runs(
    tables: Tables, catalog: CatalogSpec, source: TableIdentifier, tmp_path: Path, spelling: str
) -> None:
    marker = tmp_path / "script-ran"
    query = SCRIPT_SPELLINGS[spelling].format(script=f"touch {marker}; cat", src=source)
    table = _table()
    code, result = _create(tables, catalog, table, query)
    assert code == 1, result
    assert result["error_class"] == "QueryNotAllowed", result
    assert "script transformation" in result["error"], result
    assert not marker.exists(), "the script ran on the Spark host"
    assert not tables.spark.catalog.tableExists(str(table))


def test_variable_substitution_is_off_in_the_refresh_session(tables: Tables, catalog: CatalogSpec) -> None:
    assert len(os.environ["JAVA_HOME"]) > 3  # the canary: the driver's environment, read by Spark's ${env:}
    table = _table()
    query = "SELECT '${env:JAVA_HOME}' AS e, '${system:java.class.path}' AS s, '${spark:spark.app.name}' AS c"
    code, result = _create(tables, catalog, table, query)
    assert code == 0, result
    row = tables.spark.table(str(table)).first()
    assert row is not None
    assert (row["e"], row["s"], row["c"]) == (
        "${env:JAVA_HOME}",
        "${system:java.class.path}",
        "${spark:spark.app.name}",
    )
    assert os.environ["JAVA_HOME"] not in json.dumps(result)


def test_a_request_may_not_switch_variable_substitution_back_on(tables: Tables, catalog: CatalogSpec) -> None:
    spec = job_spec(
        _table(),
        catalog,
        "refresh",
        {
            "mode": "create",
            "query": "SELECT 1 AS x",
            "dynamic_options": {"spark.sql.variable.substitute": "true"},
        },
    )
    code, line = run(spec, tables.spark)
    result = json.loads(line)
    assert code == 1 and result["error_class"] == "InvalidJobSpec", result
    assert "spark.sql.variable" in result["error"]


def _shapes(t: str, u: str) -> list[str]:
    """Query shapes a dynamic table may use (``t``: id, v, a array<int>, m map, s struct; ``u``: id, d,
    ts, amt decimal, v)."""
    return [
        f"SELECT t.id, u.v FROM {t} t JOIN {u} u ON t.id = u.id",
        f"SELECT * FROM {t} t LEFT JOIN {u} u USING (id)",
        f"SELECT * FROM {t} t RIGHT JOIN {u} u ON t.id = u.id FULL OUTER JOIN {u} w ON w.id = u.id",
        f"SELECT * FROM {t} t LEFT SEMI JOIN {u} u ON t.id = u.id",
        f"SELECT * FROM {t} t LEFT ANTI JOIN {u} u ON t.id = u.id",
        f"SELECT * FROM {t} t CROSS JOIN {u} u",
        f"SELECT id, row_number() OVER (PARTITION BY v ORDER BY id) rn, sum(id) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) s FROM {t}",
        f"SELECT id, lag(id) OVER w, lead(id, 2, 0) OVER w, count(*) OVER (PARTITION BY v) FROM {t} WINDOW w AS (ORDER BY id)",
        f"SELECT ts, sum(amt) OVER (ORDER BY ts RANGE BETWEEN INTERVAL 1 DAY PRECEDING AND CURRENT ROW) FROM {u}",
        f"SELECT dense_rank() OVER (ORDER BY id), ntile(2) OVER (ORDER BY id), first_value(id) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM {t}",
        f"SELECT v, count(DISTINCT id), sum(id) FILTER (WHERE id > 0), avg(id) FROM {t} GROUP BY v HAVING count(*) > 0",
        f"SELECT v, id, count(*), grouping(v), grouping_id() FROM {t} GROUP BY GROUPING SETS ((v), (id), ())",
        f"SELECT v, id, count(*) FROM {t} GROUP BY CUBE(v, id)",
        f"SELECT v, id, count(*) FROM {t} GROUP BY ROLLUP(v, id)",
        f"SELECT v, count(*) FROM {t} GROUP BY ALL",
        f"SELECT * FROM (SELECT v, id FROM {t}) PIVOT (sum(id) FOR v IN ('a', 'b'))",
        f"SELECT * FROM (SELECT id, v, v AS w FROM {t}) UNPIVOT (val FOR col IN (v, w))",
        f"SELECT id, x FROM {t} LATERAL VIEW explode(a) e AS x",
        f"SELECT id, p, x FROM {t} LATERAL VIEW OUTER posexplode(a) e AS p, x",
        f"SELECT id, explode_outer(m) FROM {t}",
        "SELECT inline(array(named_struct('a', 1, 'b', 2)))",
        "SELECT stack(2, 1, 2, 3, 4)",
        f"SELECT id, (SELECT max(u.id) FROM {u} u WHERE u.v = t.v) FROM {t} t",
        f"SELECT id FROM {t} t WHERE EXISTS (SELECT 1 FROM {u} u WHERE u.id = t.id)",
        f"SELECT id FROM {t} WHERE id IN (SELECT id FROM {u}) OR id NOT IN (SELECT id FROM {u})",
        f"SELECT * FROM {t} t, LATERAL (SELECT t.id + 1 AS n)",
        f"SELECT id FROM {t} UNION SELECT id FROM {u} UNION ALL SELECT id FROM {u}",
        f"SELECT id FROM {t} INTERSECT SELECT id FROM {u} EXCEPT ALL SELECT id FROM {u}",
        f"SELECT DISTINCT v FROM {t} ORDER BY v DESC NULLS LAST LIMIT 10 OFFSET 1",
        "SELECT * FROM VALUES (1, 'a'), (2, 'b') AS v(id, name)",
        "SELECT id FROM range(10)",
        f"WITH a AS (SELECT * FROM {t}), b AS (SELECT * FROM a WHERE id > 0) SELECT * FROM b JOIN a USING (id)",
        f"SELECT CASE WHEN id > 1 THEN 'x' ELSE 'z' END, coalesce(v, 'q'), nvl(v, 'q'), if(id > 0, 1, 2), nullif(id, 1) FROM {t}",
        f"SELECT id BETWEEN 1 AND 3, v LIKE 'a%', v RLIKE '^a', v ILIKE 'A%', v LIKE ANY ('a%', 'b%'), id <=> 2 FROM {t}",
        f"SELECT CAST(id AS STRING), try_cast(v AS INT), CAST(d AS TIMESTAMP), CAST(amt AS DOUBLE) FROM {u}",
        f"SELECT d + INTERVAL 1 DAY, ts - INTERVAL '1' HOUR, date_add(d, 1), d - 1, ts + INTERVAL 1 MONTH, d - d, ts - ts, extract(YEAR FROM d), date_trunc('month', ts), INTERVAL '1-2' YEAR TO MONTH FROM {u}",
        f"SELECT timestampadd(HOUR, 1, ts), timestampdiff(DAY, ts, ts), window(ts, '1 hour').start FROM {u} GROUP BY window(ts, '1 hour'), ts",
        f"SELECT s.x, m['a'], a[0], element_at(a, 1), named_struct('k', id), s.*, size(a) FROM {t}",
        f"SELECT transform(a, x -> x + 1), filter(a, x -> x > 1), aggregate(a, 0, (acc, x) -> acc + x), transform(a, x -> transform(array(x), y -> x + y)) FROM {t}",
        f"SELECT amt * 2, amt / 3, amt % 2, id div 2, -id, ~id, v || 'x', ceil(amt), floor(amt, 1), lpad(v, 3, 'x') FROM {u}",
        f"SELECT /*+ BROADCAST(u) */ t.id FROM {t} t JOIN {u} u ON t.id = u.id",
        f"SELECT /*+ REPARTITION(2) */ * FROM {t} DISTRIBUTE BY v SORT BY id",
        f"SELECT /*+ REBALANCE */ * FROM {t} TABLESAMPLE (50 PERCENT)",
        f"SELECT current_timestamp(), current_date(), rand(), uuid(), sha2(CAST(id AS STRING), 256), md5(v), from_json('{{\"a\":1}}', 'a INT') FROM {t}",
        f"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY id), percentile(id, 0.5), collect_list(v), max_by(v, id), count_if(id > 1), median(id) FROM {t}",
        f"SELECT try_add(id, 1), try_divide(id, 0), try_sum(id) FROM {u} GROUP BY id",
        f"SELECT * FROM {t}.snapshots",
        f"SELECT * FROM IDENTIFIER('{t}')",
        f"SELECT * FROM (SELECT v, count(*) AS n FROM {t} GROUP BY v) AS tms_query WHERE `v` = CAST('a' AS STRING)",
    ]


def test_the_query_shapes_of_a_dynamic_table_pass_the_allow_list(
    tables: Tables, make_table: TableFactory
) -> None:
    spark = tables.spark
    t = make_table(
        "id bigint, v string, a array<int>, m map<string,int>, s struct<x:int>", prefix="sec_shape"
    )
    u = make_table("id bigint, d date, ts timestamp, amt decimal(10,2), v string", prefix="sec_shape")
    refused = {}
    for query in _shapes(str(t), str(u)):
        try:
            check_plan(spark.sql(query), frozenset({CATALOG}))
        except Exception as e:  # noqa: BLE001 - collected, so one run names every refused shape
            refused[query] = str(e)
    assert not refused, json.dumps(refused, indent=1)


@pytest.mark.on_demand(
    reason="test_the_query_shapes_of_a_dynamic_table_pass_the_allow_list covers the shapes a dynamic table uses; "
    "this one (864 analyses, ~50 s) is for a Spark upgrade"
)
def test_every_documented_example_of_a_built_in_function_passes_reflection_excepted(tables: Tables) -> None:
    """Spark's own examples (``ExpressionInfo.getExamples`` of each function of the built-in registry):
    the allow-list covers what the built-in functions analyse to; only reflection is refused."""
    import re

    from airflow_tablemgmt.spark.errors import QueryNotAllowed
    from airflow_tablemgmt.spark.job.query_policy import builtin_functions, check_analysed

    spark = tables.spark
    jvm = spark._jvm  # noqa: SLF001
    assert jvm is not None
    registry = jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()
    names = registry.listFunction()
    examples = []
    for i in range(names.size()):
        name = names.apply(i)
        text = registry.lookupFunction(name).get().getExamples() or ""
        examples += [
            (str(name.funcName()), " ".join(m.split()))
            for m in re.findall(r">\s*(SELECT .*?);\s*$", text, re.M | re.S)
        ]
    assert len(examples) > 800, len(examples)
    refused = {}
    for function, query in examples:
        try:
            check_analysed(
                spark.sql(query)._jdf.queryExecution().analyzed(),
                frozenset({CATALOG}),
                builtin_functions(jvm),
            )  # noqa: SLF001
        except QueryNotAllowed as e:
            refused[function] = str(e)
    assert set(refused) == {"reflect", "java_method"}, json.dumps(refused, indent=1)
