"""The plan check of a dynamic table's query, on the Spark driver, before anything of it runs.

A dynamic-table query is user code (DESIGN: *User SQL is user code*): it may read the tables of the
registered catalog the job was given, and nothing else. Spark decides what the text means, so the
check reads Spark's own plans, never the text:

1. :func:`check_statement` parses the text alone (parsing runs nothing). A statement that is not a
   query — ``ADD JAR``, ``CREATE FUNCTION``, ``SET``, ``INSERT``, ``DROP`` … — is refused, named by
   the plan node Spark parsed it to.
2. :func:`check_plan` walks the *analysed* plan of the wrapped query (``spark.sql`` of a query only
   analyses it) through children, CTE definitions and subqueries, against allow-lists
   (``core.query_policy``): what is not on them is refused by default, naming the node or function.

   * every node must be one a dynamic table needs (projection, filter, aggregate, join, window, sort,
     limit, set operations, deduplication, expand, generate, alias, view, CTEs, hints, sampling).
     A script transformation (``TRANSFORM`` / ``MAP`` / ``REDUCE … USING``, which runs a program on
     the Spark host), a command, or any node a future Spark adds is refused;
   * every leaf must be a relation of an allowed catalog (``DataSourceV2Relation`` whose catalog is
     one of ``catalogs``) or data the query spells out itself (``VALUES``, ``range``, a one-row
     ``SELECT``). SQL on files (``text.`/path```, a ``LogicalRelation``), the session catalog's
     tables and views, cached and RDD relations are refused;
   * every expression must be a function of Spark's built-in registry (``FunctionRegistry.expressions``,
     listed once per JVM, mapped to classes by ``ExpressionInfo.getClassName``) other than reflection
     (``reflect``, ``java_method``, ``try_reflect``), or one of the structural expressions a plan is
     made of (columns, literals, aliases, subqueries, lambdas, window specifications …). A
     user-defined function (Scala, Java, Python, Hive) is not in the registry and so is refused.

Refusals raise :class:`QueryNotAllowed`, whose message names what was found and what is allowed; it
never carries a value the query computed (nothing has run yet).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.query_policy import (
    ALLOWED_PLAN_NODES,
    TABLE_RELATION,
    allowed_expressions,
    expression_refusal,
    node_refusal,
)
from airflow_tablemgmt.spark.errors import InvalidQuery, QueryFailed, QueryNotAllowed
from airflow_tablemgmt.spark.protocol import describe_exception

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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


_REGISTRIES: dict[int, dict[str, set[str]]] = {}


def builtin_functions(jvm: Any) -> dict[str, set[str]]:
    """Spark's built-in function registry as ``{expression class: {function names}}`` (cached per JVM).

    ``FunctionRegistry.expressions`` is the static map ``FunctionRegistry.builtin`` is made from: the
    session's temporary or persistent functions are never in it."""
    key = id(jvm)
    if key not in _REGISTRIES:
        registry: dict[str, set[str]] = {}
        entries = jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.expressions().iterator()
        while entries.hasNext():
            entry = entries.next()
            registry.setdefault(str(entry._2()._1().getClassName()), set()).add(str(entry._1()))
        _REGISTRIES[key] = registry
    return _REGISTRIES[key]


def check_plan(df: DataFrame, catalogs: frozenset[str]) -> None:
    """Refuse the analysed plan of ``df`` unless every node and expression is allowed (see module)."""
    jvm = df.sparkSession._jvm  # noqa: SLF001
    assert jvm is not None
    check_analysed(df._jdf.queryExecution().analyzed(), catalogs, builtin_functions(jvm))  # noqa: SLF001


def check_analysed(plan: Any, catalogs: frozenset[str], registry: dict[str, set[str]]) -> None:
    """Walk ``plan`` (a JVM ``LogicalPlan``, or anything with its ``getClass``, ``children``,
    ``subqueries`` and ``expressions``) and refuse the first node or expression not allowed."""
    expressions = allowed_expressions(registry)
    pending = [plan]
    while pending:
        node = pending.pop()
        name = str(node.getClass().getName())
        if name not in ALLOWED_PLAN_NODES:
            _refuse_node(node, name, catalogs)
        if name == TABLE_RELATION:
            _check_table(node, catalogs)
        _check_expressions(node, catalogs, expressions, registry)
        for seq in (node.children(), node.subqueries()):
            pending.extend(seq.apply(i) for i in range(seq.size()))


def _refuse_node(node: Any, name: str, catalogs: frozenset[str]) -> None:
    simple = name.rsplit(".", 1)[-1]
    if simple in ("LogicalRelation", "HiveTableRelation"):
        session_table = node.catalogTable() if simple == "LogicalRelation" else None
        if session_table is not None and session_table.isDefined():  # a table of Spark's session catalog
            raise QueryNotAllowed(
                f"query: it reads {session_table.get().identifier().unquotedString()} of the session catalog, which "
                f"is not a table of a registered catalog; {_allowed(catalogs)}"
            )
        if simple == "HiveTableRelation":
            raise QueryNotAllowed(
                f"query: it reads a Hive table of the session catalog, which is not a table of a registered "
                f"catalog; {_allowed(catalogs)}"
            )
        raise QueryNotAllowed(f"query: it reads files directly (SQL on files); {_allowed(catalogs)}")
    if node.children().size() == 0 and simple.endswith(("Relation", "RDD", "Scan")):
        raise QueryNotAllowed(
            f"query: it reads a {simple}, which is not a table of a registered catalog; {_allowed(catalogs)}"
        )
    raise QueryNotAllowed(f"query: its plan uses {node_refusal(name)}; {_allowed(catalogs)}")


def _check_table(node: Any, catalogs: frozenset[str]) -> None:
    catalog = node.catalog()
    catalog_name = str(catalog.get().name()) if catalog.isDefined() else None
    if catalog_name in catalogs:
        return
    table = str(node.table().name())
    raise QueryNotAllowed(
        f"query: it reads {table} of catalog {catalog_name or '(none)'}, which is not a registered "
        f"catalog of this job; {_allowed(catalogs)}"
    )


def _check_expressions(
    node: Any, catalogs: frozenset[str], allowed: frozenset[str], registry: dict[str, set[str]]
) -> None:
    expressions = node.expressions()
    pending = [expressions.apply(i) for i in range(expressions.size())]
    while pending:
        expr = pending.pop()
        name = str(expr.getClass().getName())
        if name not in allowed:
            raise QueryNotAllowed(
                f"query: it calls {expression_refusal(name, registry)}, which a dynamic table may not; "
                f"{_allowed(catalogs)}"
            )
        children = expr.children()
        pending.extend(children.apply(i) for i in range(children.size()))
