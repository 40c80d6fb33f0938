"""Can a dynamic table's query be maintained incrementally, and if not, which construct says no.

The refresh job walks Spark's *analysed* plan of the query once for the plan check
(``spark/job/query_policy.py``); the same walk hands this module the plan as a small tree of
:class:`PlanNode` (node kind, its expressions, its children, a relation's table, a join's type, a CTE's
id), so the decision is a pure function, tested without a JVM. (Just over 400 lines: the walk and the rule sets
it reads are one decision. The mode a refresh gets -- :class:`ModePlan`, :func:`check_declared`,
:func:`plan_mode` -- stays beside it; what one refresh does is ``incremental_decision.py``.)

What can be maintained from the sources' changes (issue 41; Snowflake's and Databricks' rules):

* filters and projections over the sources (``UNION ALL`` of them too): a refresh **appends** the rows
  the sources' new rows give (``APPEND``);
* ``GROUP BY`` (or ``SELECT DISTINCT``) with decomposable aggregates — ``count``, ``sum``, ``avg``, and
  ``min``/``max`` under appends only — over such rows: the changed groups are **merged by key**
  (``MERGE_BY_KEY``);
* inner joins of such rows: the change of one side is **joined** with the other side's current state
  (``JOIN``);

and what cannot, named as the query's author wrote it: ``count(DISTINCT …)`` (any aggregate with
``DISTINCT``), other aggregates (``collect_list``, ``percentile`` …), outer, semi and anti joins, window
functions, non-deterministic or time-dependent functions (``rand``, ``uuid``, ``current_timestamp`` …),
subqueries inside expressions, ``LIMIT``/``OFFSET``, ``UNION`` without ``ALL``, ``INTERSECT``,
``EXCEPT``, grouping sets, sampling, an aggregate or join over an aggregate's result, and any plan node
this module does not know (refused by default, as the plan check refuses).

:func:`plan_mode` turns the analysis and the declared ``refresh-mode`` into the mode a refresh gets and
why; ``INCREMENTAL`` on a query that cannot be maintained is :class:`IncrementalNotPossible`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_tablemgmt.core.errors import InvalidDeclaration

# Strategies of an incremental refresh (what the next refresh would do with the sources' changes).
APPEND, MERGE_BY_KEY, JOIN = "APPEND", "MERGE_BY_KEY", "JOIN"
# Modes a refresh runs in (recorded on every refresh) and the declared ones (core.dynamic.spec.RefreshMode).
AUTO, FULL, INCREMENTAL = "AUTO", "FULL", "INCREMENTAL"
# The reason a refresh that could be incremental is FULL in this version: its execution is not built yet.
NOT_ENABLED = "incremental refresh not enabled in this version"
# What a table whose query can be maintained incrementally is told (each refresh then says what it did).
WHEN_APPENDS = (
    "incremental when the sources appended, were compacted, or deleted or overwrote rows copy-on-write "
    "(Iceberg's changelog) since the last refresh; FULL, naming why, after a merge-on-read delete or "
    "overwrite of a source or when there is no previous state"
)

# Leaves whose rows the query spells out itself: they never change between refreshes.
_CONSTANT_LEAVES = frozenset({"OneRowRelation", "LocalRelation", "Range"})
TABLE_LEAF = "DataSourceV2Relation"
# Nodes that pass their input's rows through row by row (or do not change which rows there are).
_ROW_WISE = frozenset(
    {
        "Project",
        "Filter",
        "SubqueryAlias",
        "View",
        "ResolvedHint",
        "Repartition",
        "RepartitionByExpression",
        "RebalancePartitions",
        "Sort",  # a table keeps no order
        "Generate",  # explode and friends: each input row gives its own output rows
    }
)
# Aggregate functions (class names) merged by key: a group's new value from its old one and the change.
DECOMPOSABLE = frozenset({"Count", "Sum", "Average", "Min", "Max"})
_APPEND_ONLY_AGGREGATES = frozenset({"Min", "Max"})
# Expressions whose value depends on when the query runs, although Spark calls them deterministic.
TIME_DEPENDENT = frozenset(
    {
        "CurrentTimestamp",
        "CurrentDate",
        "Now",
        "LocalTimestamp",
        "CurrentBatchTimestamp",
        "CurrentTimestampLike",
    }
)
_SUBQUERY_EXPRESSIONS = frozenset({"ScalarSubquery", "Exists", "ListQuery", "InSubquery", "LateralSubquery"})
_JOIN_NAMES = {
    "LeftOuter": "a LEFT OUTER join",
    "RightOuter": "a RIGHT OUTER join",
    "FullOuter": "a FULL OUTER join",
    "LeftSemi": "a LEFT SEMI join (EXISTS / IN with a subquery)",
    "LeftAnti": "a LEFT ANTI join (NOT EXISTS / NOT IN with a subquery)",
}
_NODE_NAMES = {
    "GlobalLimit": "LIMIT",
    "LocalLimit": "LIMIT",
    "Offset": "OFFSET",
    "Intersect": "INTERSECT",
    "Except": "EXCEPT",
    "Expand": "GROUPING SETS / ROLLUP / CUBE (or UNPIVOT)",
    "Sample": "TABLESAMPLE",
    "LateralJoin": "a LATERAL subquery",
    "Deduplicate": "a deduplication (dropDuplicates)",
}


@dataclass(frozen=True)
class Expr:
    """One expression of a plan node (every level of its expression trees, flattened).

    ``kind`` is Spark's class name (``Count``, ``AggregateExpression``, ``WindowExpression``, ``Rand``);
    ``function`` the SQL name Spark registers for it (``count``, ``rand``), and for an
    ``AggregateExpression`` or ``WindowExpression`` that of the function it applies (``aggregate`` the
    aggregate function's class); ``distinct`` marks ``f(DISTINCT …)``."""

    kind: str
    function: str | None = None
    aggregate: str | None = None
    distinct: bool = False
    deterministic: bool = True

    @property
    def name(self) -> str:
        return self.function or self.kind


@dataclass(frozen=True)
class PlanNode:
    """One node of the analysed plan: Spark's class name, its expressions, its children (subquery plans
    included), and what some kinds carry: a relation's ``table`` (``catalog.namespace.name``), a join's
    ``join_type`` (``Inner``, ``LeftOuter`` …), an aggregate's ``grouping`` columns, a CTE's ``cte_id``
    (on its ``CTERelationDef`` and every ``CTERelationRef`` to it), a set operation's ``is_all``."""

    kind: str
    expressions: tuple[Expr, ...] = ()
    children: tuple[PlanNode, ...] = ()
    table: str | None = None
    join_type: str | None = None
    grouping: tuple[str, ...] = ()
    cte_id: int | None = None
    is_all: bool = False


@dataclass(frozen=True)
class Analysis:
    """What an incremental refresh could do with the query: ``strategy`` (``APPEND``, ``MERGE_BY_KEY``,
    ``JOIN``) and how, or ``construct``, the first thing found that prevents it. ``notes`` are limits of
    the strategy (``min``/``max`` are maintained under appends only)."""

    incremental: bool
    reason: str
    strategy: str | None = None
    construct: str | None = None
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "incremental": self.incremental,
            "strategy": self.strategy,
            "reason": self.reason,
            "construct": self.construct,
            "sources": list(self.sources),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Analysis:
        return cls(
            incremental=bool(doc.get("incremental")),
            reason=str(doc.get("reason") or ""),
            strategy=doc.get("strategy"),
            construct=doc.get("construct"),
            sources=tuple(doc.get("sources") or ()),
            notes=tuple(doc.get("notes") or ()),
        )


class IncrementalNotPossible(InvalidDeclaration):
    """``refresh-mode: INCREMENTAL`` on a query that cannot be maintained incrementally (names the construct)."""


class _NotIncremental(Exception):
    def __init__(self, construct: str) -> None:
        super().__init__(construct)
        self.construct = construct


@dataclass
class _Shape:
    """What a subtree's output does when its sources change: ``constant`` (never), ``rows`` (gains the
    rows new source rows give: filters, projections, inner joins, UNION ALL) or ``groups`` (its rows are
    groups whose values change: an aggregate)."""

    kind: str
    sources: set[str] = field(default_factory=set)
    joined: bool = False
    grouping: tuple[str, ...] = ()
    aggregates: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def analyse(plan: PlanNode) -> Analysis:
    """Decide whether the query whose analysed plan is ``plan`` can be maintained incrementally."""
    try:
        shape = _Walk().shape(plan)
    except _NotIncremental as e:
        return Analysis(False, f"it uses {e.construct}", construct=e.construct, sources=tuple(_tables(plan)))
    sources = tuple(sorted(shape.sources))
    if shape.kind == "constant":
        return Analysis(False, "it reads no source table: there is no change to maintain", sources=sources)
    named = ", ".join(sources)
    if shape.kind == "groups":
        keys = f"GROUP BY {', '.join(shape.grouping)}" if shape.grouping else "a global aggregate"
        functions = f" with {', '.join(shape.aggregates)}" if shape.aggregates else ""
        over = " over an inner join" if shape.joined else ""
        return Analysis(
            True,
            f"{keys}{functions}{over} of {named}: the changed groups are merged into the table by key",
            strategy=MERGE_BY_KEY,
            sources=sources,
            notes=shape.notes,
        )
    if shape.joined:
        return Analysis(
            True,
            f"an inner join of {named}: the change of one side is joined with the other side's current state",
            strategy=JOIN,
            sources=sources,
        )
    return Analysis(
        True,
        f"filters and projections over {named}: the rows the sources' new rows give are appended",
        strategy=APPEND,
        sources=sources,
    )


def _tables(plan: PlanNode) -> list[str]:
    found: set[str] = set()
    pending = [plan]
    while pending:
        node = pending.pop()
        if node.table:
            found.add(node.table)
        pending.extend(node.children)
    return sorted(found)


class _Walk:
    """One bottom-up walk; CTE definitions are remembered by id for the references to them."""

    def __init__(self) -> None:
        self.ctes: dict[int, _Shape] = {}

    def shape(self, node: PlanNode) -> _Shape:
        kind = node.kind
        if kind not in ("Aggregate", "Window"):
            _check_expressions(node.expressions)
        if kind == TABLE_LEAF:
            return _Shape("rows", {node.table or "(a table)"})
        if kind in _CONSTANT_LEAVES:
            return _Shape("constant")
        if kind == "CTERelationRef":
            if node.cte_id is None or node.cte_id not in self.ctes:
                raise _NotIncremental("a reference to a CTE defined outside the query")
            return self.ctes[node.cte_id]
        if kind == "WithCTE":
            # Its definitions first (in the order written: one may read an earlier one), then the query.
            body = [c for c in node.children if c.kind != "CTERelationDef"]
            for d in node.children:
                if d.kind == "CTERelationDef":
                    self.shape(d)
            if len(body) != 1:
                raise _NotIncremental(f"a WITH of {len(body)} queries")
            return self.shape(body[0])
        if kind == "CTERelationDef":
            out = self._only_child(node)
            if node.cte_id is not None:
                self.ctes[node.cte_id] = out
            return out
        if kind in _ROW_WISE:
            return self._only_child(node)
        if kind == "Aggregate":
            return self._aggregate(node)
        if kind == "Distinct":
            return self._distinct(node)
        if kind == "Join":
            return self._join(node)
        if kind == "Union":
            return self._union(node)
        if kind == "Window":
            functions = sorted({e.name for e in node.expressions if e.kind == "WindowExpression"})
            raise _NotIncremental(f"a window function ({', '.join(functions) or 'OVER …'})")
        if kind in _NODE_NAMES:
            label = _NODE_NAMES[kind]
            raise _NotIncremental(
                f"{label} ALL" if node.is_all and kind in ("Intersect", "Except") else label
            )
        raise _NotIncremental(f"a {kind} node (not one an incremental refresh knows)")

    def _only_child(self, node: PlanNode) -> _Shape:
        shapes = [self.shape(c) for c in node.children]
        if len(shapes) != 1:  # a subquery plan beside the input: its expression was refused already
            raise _NotIncremental(f"a {node.kind} with {len(shapes)} inputs")
        return shapes[0]

    def _aggregate(self, node: PlanNode) -> _Shape:
        child = self._only_child(node)
        if child.kind == "groups":
            raise _NotIncremental("an aggregate over another aggregate's result (a nested GROUP BY)")
        aggregates: list[str] = []
        notes: list[str] = []
        for e in node.expressions:
            if e.kind == "AggregateExpression":
                if e.distinct:
                    raise _NotIncremental(f"{e.name}(DISTINCT …)")
                if e.aggregate not in DECOMPOSABLE:
                    raise _NotIncremental(
                        f"the aggregate {e.name} (decomposable ones: count, sum, avg, min, max)"
                    )
                aggregates.append(e.name)
                if e.aggregate in _APPEND_ONLY_AGGREGATES:
                    notes.append(
                        f"{e.name} is maintained under appends only: a delete or overwrite of a source "
                        "makes the refresh FULL"
                    )
            elif e.kind not in ("Count", "Sum", "Average", "Min", "Max"):
                _check_expressions((e,))
        if child.kind == "constant":
            return child
        return _Shape(
            "groups",
            set(child.sources),
            joined=child.joined,
            grouping=node.grouping,
            aggregates=tuple(dict.fromkeys(aggregates)),
            notes=tuple(dict.fromkeys(notes)),
        )

    def _distinct(self, node: PlanNode) -> _Shape:
        if len(node.children) == 1 and node.children[0].kind == "Union":
            raise _NotIncremental("UNION (without ALL)")
        child = self._only_child(node)
        if child.kind == "groups":
            raise _NotIncremental("SELECT DISTINCT over an aggregate's result")
        if child.kind == "constant":
            return child
        return _Shape(
            "groups", set(child.sources), joined=child.joined, grouping=("every column (DISTINCT)",)
        )

    def _join(self, node: PlanNode) -> _Shape:
        join_type = node.join_type or "Inner"
        if join_type not in ("Inner", "Cross"):
            raise _NotIncremental(_JOIN_NAMES.get(join_type, f"a {join_type} join"))
        sides = [self.shape(c) for c in node.children]
        if any(s.kind == "groups" for s in sides):
            raise _NotIncremental("a join over an aggregate's result")
        sources = set().union(*(s.sources for s in sides))
        if all(s.kind == "constant" for s in sides):
            return _Shape("constant")
        return _Shape("rows", sources, joined=True)

    def _union(self, node: PlanNode) -> _Shape:
        shapes = [self.shape(c) for c in node.children]
        if any(s.kind == "groups" for s in shapes):
            raise _NotIncremental("UNION ALL over an aggregate's result")
        sources = set().union(*(s.sources for s in shapes)) if shapes else set()
        if not sources:
            return _Shape("constant")
        return _Shape("rows", sources, joined=any(s.joined for s in shapes))


def _check_expressions(expressions: Iterable[Expr]) -> None:
    for e in expressions:
        if e.kind in _SUBQUERY_EXPRESSIONS:
            raise _NotIncremental("a subquery inside an expression (scalar, IN or EXISTS)")
        if e.kind in TIME_DEPENDENT:
            raise _NotIncremental(f"the function {e.name}, whose value depends on when the refresh runs")
        if not e.deterministic:
            raise _NotIncremental(f"the non-deterministic function {e.name}")
        if e.kind in ("AggregateExpression", "WindowExpression"):
            raise _NotIncremental(f"the {'window' if e.kind == 'WindowExpression' else 'aggregate'} {e.name}")


# -- the mode a refresh gets ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModePlan:
    """The mode a refresh runs in (``FULL`` or ``INCREMENTAL``) and why."""

    mode: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"mode": self.mode, "reason": self.reason}


def check_declared(declared: str, analysis: Analysis, table_id: str = "") -> None:
    """Refuse ``refresh-mode: INCREMENTAL`` for a query that cannot be maintained incrementally,
    naming the construct, the value and what is allowed."""
    if str(declared).upper() != INCREMENTAL or analysis.incremental:
        return
    of = f" of {table_id}" if table_id else ""
    without = (
        f"a query without {analysis.construct}" if analysis.construct else "a query that reads a source table"
    )
    raise IncrementalNotPossible(
        f"refresh-mode: INCREMENTAL is not possible for the query{of}: {analysis.reason}; allowed: AUTO "
        f"(refreshes in full and records why), FULL, or {without}"
    )


def plan_mode(declared: str, analysis: Analysis | None) -> ModePlan:
    """The mode a refresh of a table declared ``declared`` gets, and why (the analysis of its query, or
    None before Spark analysed it). A query that can be maintained incrementally gets ``INCREMENTAL`` with
    :data:`WHEN_APPENDS`; each refresh decides for itself (``core.dynamic.incremental_decision``)."""
    declared = str(declared).upper()
    if declared == FULL:
        return ModePlan(FULL, "refresh-mode is FULL")
    if analysis is None:
        return ModePlan(FULL, "the query has not been analysed yet (its first refresh does)")
    check_declared(declared, analysis)
    if not analysis.incremental:
        return ModePlan(FULL, f"the query cannot be maintained incrementally: {analysis.reason}")
    return ModePlan(INCREMENTAL, f"{analysis.strategy}: {WHEN_APPENDS}")
