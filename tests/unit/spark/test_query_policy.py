"""The plan check's default (``spark/job/query_policy.check_analysed``, ``core/query_policy``): what is
not on the allow-lists is refused. The plan here is a small stand-in for Spark's JVM objects (the same
py4j surface: ``getClass().getName()``, ``children()``, ``subqueries()``, ``expressions()`` as sequences
with ``size()`` / ``apply(i)``); ``tests/security/test_query_policy_spark.py`` runs the real spellings
through Spark."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tablemgmt.core.query_policy import (
    EXPRESSIONS,
    FORCED_SESSION,
    LOGICAL,
    allowed_expressions,
    parse_timeout,
    session_option_refusal,
)
from airflow_tablemgmt.spark.errors import QueryNotAllowed
from airflow_tablemgmt.spark.job.query_policy import check_analysed

CATALOGS = frozenset({"lake"})
REGISTRY = {
    EXPRESSIONS + "Upper": {"upper", "ucase"},
    EXPRESSIONS + "EqualTo": {"=", "=="},
    EXPRESSIONS + "CallMethodViaReflection": {"reflect", "java_method"},
}


class _Seq(list):  # a Scala Seq as py4j shows it
    def size(self) -> int:
        return len(self)

    def apply(self, i: int) -> Any:
        return self[i]


class _Class:
    def __init__(self, name: str) -> None:
        self.name = name

    def getName(self) -> str:  # noqa: N802 - the JVM's spelling
        return self.name

    def getSimpleName(self) -> str:  # noqa: N802
        return self.name.rsplit(".", 1)[-1]


class _Node:
    def __init__(self, cls: str, *children: _Node, expressions: tuple[_Node, ...] = ()) -> None:
        self.cls, self._children, self._expressions = cls, _Seq(children), _Seq(expressions)

    def getClass(self) -> _Class:  # noqa: N802
        return _Class(self.cls)

    def children(self) -> _Seq:
        return self._children

    def subqueries(self) -> _Seq:
        return _Seq()

    def expressions(self) -> _Seq:
        return self._expressions


def _expr(name: str, *children: _Node) -> _Node:
    return _Node(EXPRESSIONS + name, *children)


def _plan(leaf: _Node, *exprs: _Node) -> _Node:
    return _Node(LOGICAL + "Project", _Node(LOGICAL + "Filter", leaf), expressions=exprs)


def test_an_allowed_plan_passes() -> None:
    upper = _expr("Alias", _expr("Upper", _expr("AttributeReference")))
    check_analysed(_plan(_Node(LOGICAL + "OneRowRelation"), upper), CATALOGS, REGISTRY)


def test_an_unknown_node_class_is_refused_by_default() -> None:
    unknown = _Node("org.example.spark.SomeFutureNode", _Node(LOGICAL + "OneRowRelation"))
    with pytest.raises(QueryNotAllowed, match=r"SomeFutureNode node \(org\.example\.spark\.SomeFutureNode\)"):
        check_analysed(_plan(unknown), CATALOGS, REGISTRY)


def test_a_script_transformation_is_refused_naming_it() -> None:
    script = _Node(LOGICAL + "ScriptTransformation", _Node(LOGICAL + "OneRowRelation"))
    with pytest.raises(QueryNotAllowed, match="script transformation"):
        check_analysed(_plan(script), CATALOGS, REGISTRY)


def test_an_unknown_leaf_is_refused_as_not_a_table_of_a_registered_catalog() -> None:
    rdd = _Node("org.apache.spark.sql.execution.LogicalRDD")
    with pytest.raises(QueryNotAllowed, match="LogicalRDD, which is not a table of a registered catalog"):
        check_analysed(_plan(rdd), CATALOGS, REGISTRY)


def test_an_expression_outside_the_registry_is_refused_by_default() -> None:
    udf = _expr("Alias", _Node("org.example.MyExpression", _expr("AttributeReference")))
    with pytest.raises(QueryNotAllowed, match=r"the expression MyExpression \(org\.example\.MyExpression\)"):
        check_analysed(_plan(_Node(LOGICAL + "OneRowRelation"), udf), CATALOGS, REGISTRY)


def test_a_registered_function_is_allowed_unless_denied() -> None:
    reflect = _expr("Alias", _expr("CallMethodViaReflection", _expr("Literal")))
    with pytest.raises(QueryNotAllowed, match=r"reflection \(reflect / java_method\)"):
        check_analysed(_plan(_Node(LOGICAL + "OneRowRelation"), reflect), CATALOGS, REGISTRY)
    assert EXPRESSIONS + "CallMethodViaReflection" not in allowed_expressions(REGISTRY)
    assert EXPRESSIONS + "Upper" in allowed_expressions(REGISTRY)


def test_a_user_defined_function_is_named() -> None:
    udf = _expr("ScalaUDF", _expr("AttributeReference"))
    with pytest.raises(QueryNotAllowed, match="a user-defined function"):
        check_analysed(_plan(_Node(LOGICAL + "OneRowRelation"), udf), CATALOGS, REGISTRY)


def test_variable_substitution_is_forced_off_and_may_not_be_set() -> None:
    assert FORCED_SESSION["spark.sql.variable.substitute"] == "false"
    refusal = session_option_refusal("spark.sql.variable.substitute", "refresh.dynamic_options")
    assert refusal is not None and "spark.sql.variable" in refusal


@pytest.mark.parametrize("value", [0, -1, "600", True, float("inf")])
def test_a_timeout_must_be_a_positive_number(value: Any) -> None:
    with pytest.raises(ValueError, match="timeout_seconds: expected a positive number"):
        parse_timeout(value)


def test_a_timeout_is_seconds_or_none() -> None:
    assert parse_timeout(None) is None
    assert parse_timeout(600) == 600.0
