"""spark/job/refresh_plan.py: the analysed plan's translation into core.dynamic.incremental's tree, on a
stand-in for Spark's JVM objects (the py4j surface the plan check walks: ``getClass()``, ``children()``,
``subqueries()``, ``expressions()`` as sequences, plus the accessors of Join, Aggregate, AggregateExpression,
WindowExpression and relations). Real Spark: tests/integration/spark/test_refresh_modes.py."""

from __future__ import annotations

from typing import Any

from airflow_tablemgmt.core.dynamic.incremental import MERGE_BY_KEY, Expr, analyse
from airflow_tablemgmt.core.query_policy import EXPRESSIONS, LOGICAL
from airflow_tablemgmt.spark.job.refresh_plan import plan_node

AGG = EXPRESSIONS + "aggregate."
REGISTRY = {
    AGG + "Count": {"count"},
    AGG + "Sum": {"sum"},
    EXPRESSIONS + "Rand": {"rand", "random"},
    EXPRESSIONS + "CurrentDate": {"curdate", "current_date"},
    EXPRESSIONS + "RowNumber": {"row_number"},
}


class _Seq(list):
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


class _Obj:
    def __init__(self, cls_: str, *children: _Obj, deterministic: bool = True, **attrs: Any) -> None:
        self.cls, self._children, self._deterministic, self.attrs = cls_, _Seq(children), deterministic, attrs

    def getClass(self) -> _Class:  # noqa: N802
        return _Class(self.cls)

    def children(self) -> _Seq:
        return self._children

    def deterministic(self) -> bool:
        return self._deterministic

    def __getattr__(self, name: str) -> Any:
        attrs = self.__dict__.get("attrs", {})
        if name in attrs:
            return lambda: attrs[name]
        raise AttributeError(name)


class _Plan(_Obj):
    def __init__(self, cls: str, *children: _Obj, expressions: tuple[_Obj, ...] = (), **attrs: Any) -> None:
        super().__init__(LOGICAL + cls, *children, **attrs)
        self._expressions = _Seq(expressions)
        self._subqueries = _Seq(attrs.pop("subqueries", ()))

    def expressions(self) -> _Seq:
        return self._expressions

    def subqueries(self) -> _Seq:
        return self._subqueries


class _Option:
    def __init__(self, value: Any) -> None:
        self.value = value

    def isDefined(self) -> bool:  # noqa: N802
        return self.value is not None

    def get(self) -> Any:
        return self.value


def _relation(name: str) -> _Obj:
    ident = _Obj("Identifier", namespace=["db"], name=name)
    rel = _Plan("x", catalog=_Option(_Obj("Catalog", name="lake")), identifier=_Option(ident))
    rel.cls = "org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation"
    return rel


def _e(cls: str, *children: _Obj, **kw: Any) -> _Obj:
    return _Obj(EXPRESSIONS + cls, *children, **kw)


def test_a_group_by_with_count_and_sum_translates_to_a_key_merge() -> None:
    count = _Obj(AGG + "Count", _e("Literal"))
    total = _Obj(AGG + "Sum", _e("AttributeReference"))
    aggregate = _Plan(
        "Aggregate",
        _relation("orders"),
        expressions=(
            _e("AttributeReference", name="day"),
            _e("Alias", _e("AggregateExpression", count, aggregateFunction=count, isDistinct=False)),
            _e("Alias", _e("AggregateExpression", total, aggregateFunction=total, isDistinct=False)),
        ),
        groupingExpressions=_Seq([_e("AttributeReference", name="day")]),
    )
    tree = plan_node(_Plan("Project", aggregate, expressions=(_e("AttributeReference"),)), REGISTRY)
    agg_node = tree.children[0]
    assert (agg_node.kind, agg_node.grouping, agg_node.children[0].table) == (
        "Aggregate",
        ("day",),
        "lake.db.orders",
    )
    assert Expr("AggregateExpression", "count", "Count") in agg_node.expressions
    assert analyse(tree).strategy == MERGE_BY_KEY


def test_distinct_window_join_type_and_the_own_non_deterministic_expression() -> None:
    count = _Obj(AGG + "Count", _e("AttributeReference"))
    distinct = plan_node(
        _Plan(
            "Aggregate",
            _relation("orders"),
            expressions=(
                _e("Alias", _e("AggregateExpression", count, aggregateFunction=count, isDistinct=True)),
            ),
            groupingExpressions=_Seq(),
        ),
        REGISTRY,
    )
    assert analyse(distinct).construct == "count(DISTINCT …)"

    row_number = _e("RowNumber")
    window = plan_node(
        _Plan(
            "Window",
            _relation("orders"),
            expressions=(_e("Alias", _e("WindowExpression", row_number, windowFunction=row_number)),),
        ),
        REGISTRY,
    )
    assert analyse(window).construct == "a window function (row_number)"

    left = _Obj("org.apache.spark.sql.catalyst.plans.LeftOuter$")
    join = plan_node(_Plan("Join", _relation("a"), _relation("b"), joinType=left), REGISTRY)
    assert join.join_type == "LeftOuter" and analyse(join).construct == "a LEFT OUTER join"

    # Alias(rand()) is non-deterministic too; only rand itself is named
    rand = _e("Alias", _e("Rand", _e("Literal"), deterministic=False), deterministic=False)
    random = plan_node(_Plan("Project", _relation("a"), expressions=(rand,)), REGISTRY)
    assert [e.deterministic for e in random.expressions] == [True, False, True]
    assert analyse(random).construct == "the non-deterministic function rand"

    today = plan_node(_Plan("Filter", _relation("a"), expressions=(_e("CurrentDate"),)), REGISTRY)
    assert (
        analyse(today).construct == "the function current_date, whose value depends on when the refresh runs"
    )


def test_a_plan_the_walk_cannot_read_refreshes_in_full_but_is_no_ground_for_incremental(
    monkeypatch: Any,
) -> None:
    import pytest

    from airflow_tablemgmt.core.dynamic.incremental import IncrementalNotPossible
    from airflow_tablemgmt.spark.job import refresh_plan

    def broken(df: Any) -> Any:
        raise AttributeError("no such accessor on this Spark")

    monkeypatch.setattr(refresh_plan, "analysed_tree", broken)
    analysis, mode = refresh_plan.refresh_mode(object(), "AUTO", "lake.db.t")  # type: ignore[arg-type]
    assert not analysis.incremental and mode.mode == "FULL"
    assert mode.reason.endswith("it uses a plan the incremental analysis could not read (AttributeError)")
    with pytest.raises(IncrementalNotPossible, match="could not read"):
        refresh_plan.refresh_mode(object(), "INCREMENTAL", "lake.db.t")  # type: ignore[arg-type]
