"""The plan check of a dynamic table's query, on the Spark driver, before anything of it runs.

A dynamic-table query is user code (DESIGN: *User SQL is user code*): it may read the tables of the
registered catalog the job was given, and nothing else. Spark decides what the text means, so the
check reads Spark's own plans, never the text:

1. :func:`check_statement` parses the text alone (parsing runs nothing). A statement that is not a
   query — ``ADD JAR``, ``CREATE FUNCTION``, ``SET``, ``INSERT``, ``DROP`` … — is refused, named by
   the plan node Spark parsed it to.
2. :func:`check_plan` walks the *analysed* plan of the wrapped query (``spark.sql`` of a query only
   analyses it) through children, CTE definitions and subqueries:

   * every leaf must be a relation of an allowed catalog (``DataSourceV2Relation`` whose catalog is
     one of ``catalogs``) or data the query spells out itself (``VALUES``, ``range``, a one-row
     ``SELECT``). SQL on files (``text.`/path```, a ``LogicalRelation``), the session catalog's
     tables and views, cached and RDD relations are refused;
   * no expression may call Java by reflection (``reflect``, ``java_method``, ``try_reflect``) or a
     user-defined function (Scala, Java, Python, Hive);
   * no node may be a command.

Refusals raise :class:`QueryNotAllowed`, whose message names what was found and what is allowed; it
never carries a value the query computed (nothing has run yet).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.spark.errors import InvalidQuery, QueryFailed, QueryNotAllowed
from airflow_tablemgmt.spark.protocol import describe_exception

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Leaves whose rows the query spells out itself (VALUES, range(), SELECT without FROM) or that refer
# to a CTE defined (and walked) in the same plan.
DATA_LEAVES = frozenset({"OneRowRelation", "LocalRelation", "Range", "CTERelationRef"})
TABLE_LEAF = "DataSourceV2Relation"
DENIED_EXPRESSIONS = {
    "CallMethodViaReflection": "reflection (reflect / java_method)",
    "TryReflect": "reflection (try_reflect)",
    "ScalaUDF": "a user-defined function",
    "ScalaUDAF": "a user-defined aggregate function",
    "ScalaAggregator": "a user-defined aggregate function",
    "PythonUDF": "a Python user-defined function",
    "PythonUDAF": "a Python user-defined function",
    "HiveSimpleUDF": "a Hive user-defined function",
    "HiveGenericUDF": "a Hive user-defined function",
    "HiveGenericUDTF": "a Hive user-defined function",
    "HiveUDAFFunction": "a Hive user-defined function",
}
COMMAND_CLASS = "org.apache.spark.sql.catalyst.plans.logical.Command"
NOT_QUERIES = (COMMAND_CLASS, "org.apache.spark.sql.catalyst.plans.logical.ParsedStatement")
ALLOWED = (
    "allowed: one SELECT (or WITH … SELECT) reading tables of the registered catalog {catalogs}, with "
    "Spark's built-in functions"
)


@contextmanager
def sanitized_failure(log: logging.Logger) -> Iterator[None]:
    """Run a block of user SQL: a failure whose message we wrote (a ``TableMgmtError``: the policy's,
    the analysis', schema drift …) passes unchanged; any other — Spark's driver or executor exception
    text — is logged in full to ``log`` (the task log) and raised as :class:`QueryFailed`."""
    try:
        yield
    except TableMgmtError:
        raise
    except Exception as e:
        error_class, message = describe_exception(e)
        log.error("the dynamic table's query failed in Spark: %s: %s", error_class, message)
        raise QueryFailed(
            f"query: Spark failed while running it ({error_class}); Spark's message is in the log of the "
            "task that ran this process and is not stored here"
        ) from None


def _allowed(catalogs: frozenset[str]) -> str:
    return ALLOWED.format(catalogs=", ".join(sorted(catalogs)) or "(none)")


def check_statement(spark: SparkSession, query: str, catalogs: frozenset[str]) -> None:
    """Refuse a statement that is not a query: one Spark parses to a command or a parsed statement
    (``INSERT``). Parsing runs nothing. A text Spark cannot parse at all is left to the caller's parse,
    which reports the syntax error."""
    parser = spark._jsparkSession.sessionState().sqlParser()  # noqa: SLF001 - no public parser API
    try:
        plan = parser.parsePlan(query)
    except Exception:  # noqa: BLE001 - a syntax error: the caller's own parse names it
        return
    jvm = spark._jvm  # noqa: SLF001
    assert jvm is not None
    for kind in NOT_QUERIES:
        if jvm.java.lang.Class.forName(kind).isInstance(plan):
            name = str(plan.getClass().getSimpleName())
            raise QueryNotAllowed(
                f"query: Spark reads it as {name}, a command, not a query; {_allowed(catalogs)}"
            )


def parse_query(spark: SparkSession, query: str) -> str | None:
    """Parse the query alone (nothing runs), so a syntax error points into the user's text rather than
    into the refresh's wrapper. Returns the kind of statement Spark parsed, or None if the parser was not
    reachable."""
    parser = spark._jsparkSession.sessionState().sqlParser()  # noqa: SLF001 - no public parser API
    try:
        plan = parser.parseQuery(query)
    except Exception as e:
        if type(e).__name__ != "ParseException" and getattr(e, "java_exception", None) is None:
            return None  # py4j without the method: the wrapper still parses
        _, message = describe_exception(e)
        raise InvalidQuery(f"query: not one Spark SQL SELECT statement: {message}") from None
    return str(plan.getClass().getSimpleName())


def check_plan(df: DataFrame, catalogs: frozenset[str]) -> None:
    """Refuse the analysed plan of ``df`` unless it only reads tables of ``catalogs`` (see module)."""
    jvm = df.sparkSession._jvm  # noqa: SLF001
    assert jvm is not None
    command = jvm.java.lang.Class.forName(COMMAND_CLASS)
    pending = [df._jdf.queryExecution().analyzed()]  # noqa: SLF001
    while pending:
        node = pending.pop()
        name = str(node.getClass().getSimpleName())
        if command.isInstance(node):
            raise QueryNotAllowed(f"query: its plan runs the command {name}; {_allowed(catalogs)}")
        _check_expressions(node, catalogs)
        children = node.children()
        if children.size() == 0:
            _check_leaf(node, name, catalogs)
        for seq in (children, node.subqueries()):
            pending.extend(seq.apply(i) for i in range(seq.size()))


def _check_leaf(node: Any, name: str, catalogs: frozenset[str]) -> None:
    if name in DATA_LEAVES:
        return
    if name == TABLE_LEAF:
        catalog = node.catalog()
        catalog_name = str(catalog.get().name()) if catalog.isDefined() else None
        if catalog_name in catalogs:
            return
        table = str(node.table().name())
        raise QueryNotAllowed(
            f"query: it reads {table} of catalog {catalog_name or '(none)'}, which is not a registered "
            f"catalog of this job; {_allowed(catalogs)}"
        )
    if name in ("LogicalRelation", "HiveTableRelation"):
        session_table = node.catalogTable() if name == "LogicalRelation" else None
        if session_table is not None and session_table.isDefined():  # a table of Spark's session catalog
            raise QueryNotAllowed(
                f"query: it reads {session_table.get().identifier().unquotedString()} of the session catalog, which "
                f"is not a table of a registered catalog; {_allowed(catalogs)}"
            )
        if name == "HiveTableRelation":
            raise QueryNotAllowed(
                f"query: it reads a Hive table of the session catalog, which is not a table of a registered "
                f"catalog; {_allowed(catalogs)}"
            )
        raise QueryNotAllowed(f"query: it reads files directly (SQL on files); {_allowed(catalogs)}")
    raise QueryNotAllowed(
        f"query: it reads a {name}, which is not a table of a registered catalog; {_allowed(catalogs)}"
    )


def _check_expressions(node: Any, catalogs: frozenset[str]) -> None:
    expressions = node.expressions()
    pending = [expressions.apply(i) for i in range(expressions.size())]
    while pending:
        expr = pending.pop()
        name = str(expr.getClass().getSimpleName())
        what = DENIED_EXPRESSIONS.get(name)
        if what is not None:
            raise QueryNotAllowed(
                f"query: it calls {what}, which a dynamic table may not; {_allowed(catalogs)}"
            )
        children = expr.children()
        pending.extend(children.apply(i) for i in range(children.size()))
