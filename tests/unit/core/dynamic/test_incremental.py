"""core/dynamic/incremental.py: which query shapes an incremental refresh can maintain and which construct
says no, on plan trees shaped as Spark 3.5 analyses the queries in the comments (the driver's extraction,
spark/job/refresh_plan.py, is checked against real Spark in tests/integration/spark/test_refresh_modes.py)."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.dynamic.incremental import (
    APPEND,
    JOIN,
    MERGE_BY_KEY,
    WHEN_APPENDS,
    Analysis,
    Expr,
    IncrementalNotPossible,
    PlanNode,
    analyse,
    check_declared,
    plan_mode,
)

ATTR = Expr("AttributeReference")
ALIAS = Expr("Alias")


def table(name: str = "lake.db.orders") -> PlanNode:
    return PlanNode("SubqueryAlias", children=(PlanNode("DataSourceV2Relation", table=name),))


def project(child: PlanNode, *exprs: Expr) -> PlanNode:
    return PlanNode("Project", expressions=(ATTR, *exprs), children=(child,))


def wrapped(child: PlanNode) -> PlanNode:
    """The refresh's ``SELECT * FROM (<query>) AS tms_query``."""
    return project(PlanNode("SubqueryAlias", children=(child,)))


def agg(function: str, cls: str, distinct: bool = False) -> tuple[Expr, ...]:
    return (ALIAS, Expr("AggregateExpression", function, cls, distinct=distinct), Expr(cls, function), ATTR)


def aggregate(child: PlanNode, *aggs: tuple[Expr, ...], grouping: tuple[str, ...] = ("day",)) -> PlanNode:
    exprs = tuple(e for a in aggs for e in a)
    return PlanNode("Aggregate", expressions=(ATTR, *exprs), children=(child,), grouping=grouping)


def join(left: PlanNode, right: PlanNode, join_type: str = "Inner") -> PlanNode:
    return PlanNode(
        "Join", expressions=(Expr("EqualTo", "="), ATTR, ATTR), children=(left, right), join_type=join_type
    )


def test_filters_and_projections_over_one_source_append() -> None:
    # SELECT id, v * 2 AS w FROM lake.db.orders WHERE v > 0
    plan = wrapped(
        project(
            PlanNode("Filter", (Expr("GreaterThan", ">"), ATTR, Expr("Literal")), (table(),)),
            Expr("Multiply", "*"),
        )
    )
    a = analyse(plan)
    assert (a.incremental, a.strategy, a.sources) == (True, APPEND, ("lake.db.orders",))
    assert a.reason == (
        "filters and projections over lake.db.orders: the rows the sources' new rows give are appended"
    )


def test_group_by_with_decomposable_aggregates_merges_by_key_and_notes_min_max() -> None:
    # SELECT day, count(*) AS n, sum(v), avg(v), max(v) FROM lake.db.orders GROUP BY day
    plan = wrapped(
        aggregate(
            table(),
            agg("count", "Count"),
            agg("sum", "Sum"),
            agg("avg", "Average"),
            agg("max", "Max"),
        )
    )
    a = analyse(plan)
    assert (a.incremental, a.strategy) == (True, MERGE_BY_KEY)
    assert a.reason == (
        "GROUP BY day with count, sum, avg, max of lake.db.orders: the changed groups are merged into the "
        "table by key"
    )
    assert a.notes == (
        "max is maintained under appends only: a delete or overwrite of a source makes the refresh FULL",
    )


def test_a_having_filter_over_the_groups_is_still_merged_by_key() -> None:
    plan = wrapped(
        PlanNode("Filter", (Expr("GreaterThan", ">"), ATTR), (aggregate(table(), agg("count", "Count")),))
    )
    assert analyse(plan).strategy == MERGE_BY_KEY


def test_inner_join_joins_the_changed_side() -> None:
    # SELECT o.id, c.name FROM lake.db.orders o JOIN lake.db.customers c ON o.cid = c.id
    plan = wrapped(project(join(table(), table("lake.db.customers"))))
    a = analyse(plan)
    assert (a.incremental, a.strategy, a.sources) == (True, JOIN, ("lake.db.customers", "lake.db.orders"))
    assert "the change of one side is joined with the other side's current state" in a.reason


def test_group_by_over_an_inner_join_and_union_all_and_ctes() -> None:
    joined = aggregate(join(table(), table("lake.db.customers")), agg("sum", "Sum"))
    assert analyse(wrapped(joined)).reason.startswith("GROUP BY day with sum over an inner join of")
    union_all = PlanNode("Union", children=(project(table()), project(table("lake.db.old_orders"))))
    assert analyse(wrapped(union_all)).strategy == APPEND
    # WITH c AS (SELECT * FROM orders WHERE v > 0) SELECT day, count(*) FROM c GROUP BY day
    cte = PlanNode(
        "WithCTE",
        children=(
            PlanNode("CTERelationDef", children=(PlanNode("Filter", (ATTR,), (table(),)),), cte_id=0),
            aggregate(
                PlanNode("SubqueryAlias", children=(PlanNode("CTERelationRef", cte_id=0),)),
                agg("count", "Count"),
            ),
        ),
    )
    a = analyse(wrapped(cte))
    assert (a.strategy, a.sources) == (MERGE_BY_KEY, ("lake.db.orders",))


@pytest.mark.parametrize(
    ("plan", "construct"),
    [
        (aggregate(table(), agg("count", "Count", distinct=True)), "count(DISTINCT …)"),
        (
            aggregate(table(), agg("collect_list", "CollectList")),
            "the aggregate collect_list (decomposable ones",
        ),
        (join(table(), table("lake.db.c"), "LeftOuter"), "a LEFT OUTER join"),
        (join(table(), table("lake.db.c"), "FullOuter"), "a FULL OUTER join"),
        (join(table(), table("lake.db.c"), "LeftAnti"), "a LEFT ANTI join (NOT EXISTS / NOT IN"),
        (
            PlanNode(
                "Window",
                (Expr("WindowExpression", "row_number"), Expr("RowNumber", "row_number"), ATTR),
                (table(),),
            ),
            "a window function (row_number)",
        ),
        (project(table(), Expr("Rand", "rand", deterministic=False)), "the non-deterministic function rand"),
        (project(table(), Expr("Uuid", "uuid", deterministic=False)), "the non-deterministic function uuid"),
        (
            PlanNode("Filter", (Expr("CurrentTimestamp", "current_timestamp"),), (table(),)),
            "the function current_timestamp, whose value depends on when the refresh runs",
        ),
        (
            PlanNode("Filter", (Expr("InSubquery"), Expr("ListQuery")), (table(), table("lake.db.c"))),
            "a subquery inside an expression (scalar, IN or EXISTS)",
        ),
        (
            PlanNode("GlobalLimit", (Expr("Literal"),), (PlanNode("LocalLimit", children=(table(),)),)),
            "LIMIT",
        ),
        (
            PlanNode("Distinct", children=(PlanNode("Union", children=(table(), table("lake.db.c"))),)),
            "UNION (without ALL)",
        ),
        (PlanNode("Except", children=(table(), table("lake.db.c")), is_all=True), "EXCEPT ALL"),
        (PlanNode("Intersect", children=(table(), table("lake.db.c"))), "INTERSECT"),
        (
            aggregate(PlanNode("Expand", children=(table(),)), agg("count", "Count")),
            "GROUPING SETS / ROLLUP / CUBE",
        ),
        (
            aggregate(aggregate(table(), agg("count", "Count")), agg("sum", "Sum")),
            "an aggregate over another aggregate's result",
        ),
        (
            join(aggregate(table(), agg("count", "Count")), table("lake.db.c")),
            "a join over an aggregate's result",
        ),
        (PlanNode("ScriptTransformation", children=(table(),)), "a ScriptTransformation node"),
    ],
)
def test_constructs_that_cannot_be_maintained_are_named(plan: PlanNode, construct: str) -> None:
    a = analyse(wrapped(plan))
    assert not a.incremental and a.strategy is None
    assert a.construct is not None and a.construct.startswith(construct), a.construct
    assert a.reason == f"it uses {a.construct}"
    assert a.sources  # the tables it reads, still named


def test_select_distinct_is_a_group_by_of_every_column_and_a_constant_query_has_nothing_to_maintain() -> None:
    assert analyse(wrapped(PlanNode("Distinct", children=(project(table()),)))).strategy == MERGE_BY_KEY
    constant = analyse(wrapped(project(PlanNode("OneRowRelation"), Expr("Literal"))))
    assert (constant.incremental, constant.reason) == (
        False,
        "it reads no source table: there is no change to maintain",
    )


def test_the_declared_mode_gives_the_mode_and_the_reason() -> None:
    can = analyse(wrapped(aggregate(table(), agg("count", "Count"))))
    cannot = analyse(wrapped(PlanNode("Window", (Expr("WindowExpression", "rank"),), (table(),))))
    # The table is told its refreshes are incremental, and when they are not (each refresh says why).
    planned = {"mode": "INCREMENTAL", "reason": f"MERGE_BY_KEY: {WHEN_APPENDS}"}
    assert plan_mode("AUTO", can).to_dict() == planned
    assert plan_mode("INCREMENTAL", can).to_dict() == planned
    assert plan_mode("AUTO", cannot).to_dict() == {
        "mode": "FULL",
        "reason": "the query cannot be maintained incrementally: it uses a window function (rank)",
    }
    assert plan_mode("FULL", cannot).reason == "refresh-mode is FULL"
    assert plan_mode("AUTO", None).reason == "the query has not been analysed yet (its first refresh does)"
    with pytest.raises(IncrementalNotPossible) as e:
        check_declared("INCREMENTAL", cannot, "lake.db.ranked")
    assert str(e.value) == (
        "refresh-mode: INCREMENTAL is not possible for the query of lake.db.ranked: it uses a window function "
        "(rank); allowed: AUTO (refreshes in full and records why), FULL, or a query without a window "
        "function (rank)"
    )
    with pytest.raises(IncrementalNotPossible):
        plan_mode("incremental", cannot)
    check_declared("AUTO", cannot)  # AUTO never refuses


def test_an_analysis_round_trips_through_its_stored_document() -> None:
    a = analyse(wrapped(aggregate(table(), agg("min", "Min"))))
    assert Analysis.from_dict(a.to_dict()) == a
