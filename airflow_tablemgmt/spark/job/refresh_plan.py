"""The analysed plan of a dynamic table's query as the small tree ``core.dynamic.incremental`` decides on.

It walks what the plan check walks (``query_policy.check_analysed``: each node's children and subquery
plans, each expression tree whole) and keeps only what the decision needs — node and expression class
names, the SQL function names Spark registers for them, a relation's table, a join's type, an aggregate's
grouping columns, a CTE's id, ``DISTINCT`` on an aggregate, and which expression is itself
non-deterministic. The decision (:func:`refresh_mode`) is then a pure function of that tree: the rules
are tested without a JVM, and this module only translates.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.dynamic.incremental import (
    Analysis,
    Expr,
    ModePlan,
    PlanNode,
    analyse,
    check_declared,
    plan_mode,
)
from airflow_tablemgmt.spark.job import query_policy

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _simple(obj: Any) -> str:
    return str(obj.getClass().getSimpleName()).rstrip("$")


def _function_name(expr: Any, registry: dict[str, set[str]]) -> str | None:
    """The SQL name Spark registers for ``expr``'s class (``Rand`` -> ``rand``), the one spelled like the
    class when there are several (``CurrentDate``: ``current_date``, not ``curdate``)."""
    names = registry.get(str(expr.getClass().getName()))
    if not names:
        return None
    snake = _CAMEL.sub("_", _simple(expr)).lower()
    return snake if snake in names else sorted(names)[0]


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def _expressions(node: Any, registry: dict[str, set[str]]) -> tuple[Expr, ...]:
    """Every expression of ``node``, parents before children."""
    out: list[Expr] = []
    pending = list(reversed(_seq(node.expressions())))
    while pending:
        expr = pending.pop()
        kind = _simple(expr)
        children = _seq(expr.children())
        function, aggregate, distinct = _function_name(expr, registry), None, False
        if kind == "AggregateExpression":
            inner = expr.aggregateFunction()
            function, aggregate, distinct = (
                _function_name(inner, registry),
                _simple(inner),
                bool(expr.isDistinct()),
            )
        elif kind == "WindowExpression":
            inner = expr.windowFunction()
            if _simple(inner) == "AggregateExpression":
                inner = inner.aggregateFunction()
            function = _function_name(inner, registry) or _simple(inner)
        # Only the expression that is non-deterministic itself, not every parent that contains it.
        own = not bool(expr.deterministic()) and all(bool(c.deterministic()) for c in children)
        out.append(Expr(kind, function, aggregate, distinct, deterministic=not own))
        pending.extend(reversed(children))
    return tuple(out)


def _table(node: Any) -> str:
    catalog, ident = node.catalog(), node.identifier()
    if catalog.isDefined() and ident.isDefined():
        parts = [catalog.get().name(), *list(ident.get().namespace()), ident.get().name()]
        return ".".join(str(p) for p in parts)
    return str(node.table().name())


def _name(expr: Any) -> str:
    try:
        return str(expr.name())
    except Exception:  # noqa: BLE001 - not a named expression: its SQL text names it
        return str(expr.sql())


def plan_node(plan: Any, registry: dict[str, set[str]]) -> PlanNode:
    """``plan`` (a JVM ``LogicalPlan``) as a :class:`PlanNode` tree: its children, then its subquery plans."""
    kind = _simple(plan)
    children = tuple(plan_node(c, registry) for c in [*_seq(plan.children()), *_seq(plan.subqueries())])
    extra: dict[str, Any] = {}
    if kind == "DataSourceV2Relation":
        extra["table"] = _table(plan)
    elif kind == "Join":
        extra["join_type"] = _simple(plan.joinType())
    elif kind == "Aggregate":
        extra["grouping"] = tuple(_name(e) for e in _seq(plan.groupingExpressions()))
    elif kind == "CTERelationDef":
        extra["cte_id"] = int(plan.id())
    elif kind == "CTERelationRef":
        extra["cte_id"] = int(plan.cteId())
    elif kind in ("Intersect", "Except"):
        extra["is_all"] = bool(plan.isAll())
    return PlanNode(kind, _expressions(plan, registry), children, **extra)


def analysed_tree(df: DataFrame) -> PlanNode:
    """The analysed plan of ``df`` (the query the refresh runs) as a :class:`PlanNode` tree."""
    jvm = df.sparkSession._jvm  # noqa: SLF001
    assert jvm is not None
    registry = query_policy.builtin_functions(jvm)
    return plan_node(df._jdf.queryExecution().analyzed(), registry)  # noqa: SLF001


def refresh_mode(df: DataFrame, declared: str, table_id: str) -> tuple[Analysis, ModePlan]:
    """The query's incremental analysis and the mode this refresh runs in; ``INCREMENTAL`` declared on a
    query that cannot be maintained incrementally raises ``IncrementalNotPossible`` naming the construct."""
    try:
        tree = analysed_tree(df)
    except Exception as e:  # noqa: BLE001 - an advisory walk never fails a FULL or AUTO refresh
        log.warning(
            "the incremental analysis of %s's plan failed; it refreshes in full", table_id, exc_info=True
        )
        construct = f"a plan the incremental analysis could not read ({type(e).__name__})"
        analysis = Analysis(False, f"it uses {construct}", construct=construct)
    else:
        analysis = analyse(tree)
    check_declared(declared, analysis, table_id)
    return analysis, plan_mode(declared, analysis)
