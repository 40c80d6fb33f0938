"""The query's analysed plan with each source occurrence read at a chosen version, and its aggregate's shape.

An incremental refresh runs the user's query itself, not a rewrite of its text: the analysed plan (already
checked by the query policy) is copied with each ``DataSourceV2Relation`` read as a
``core.dynamic.delta_terms.Read`` says — Iceberg's read options on the relation (``snapshot-id`` for a
table at a snapshot; ``start-snapshot-id`` / ``end-snapshot-id`` for the rows appended between two, which
Iceberg's ``SparkScanBuilder`` turns into an incremental append scan), or an always-false filter for no
rows, or, for the rows a copy-on-write delete or overwrite removed or added, Iceberg's changelog table
(``<table>.changes`` between the same two snapshots, its rows of one ``_change_type``) under a projection that
gives its columns the relation's own attribute ids, so that the plan above reads them unchanged — and turned
back into a DataFrame. Everything else in the plan (filters, projections, joins,
generators) stays as Spark analysed it.

For ``GROUP BY`` / ``DISTINCT`` queries (:func:`aggregate_shape`) the aggregate node is found under the
pass-through nodes above it, and each output column is either a grouping key or one ``count`` / ``sum`` /
``avg`` / ``min`` / ``max`` (a :class:`Slot`); anything else (``HAVING``, an expression over aggregates,
a key not in the output) is named, and the refresh is FULL with that reason.

py4j only: the refresh job runs on a classic session (Spark Connect runs no refresh).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.dynamic.delta_terms import AT, CHANGE, DELETED, INSERTED, NONE, Read
from airflow_tablemgmt.core.identifiers import TableIdentifier

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

RELATION = "DataSourceV2Relation"
# Nodes above an aggregate that keep its rows and columns as they are (a Project only when it renames).
_PASS_THROUGH = frozenset({"SubqueryAlias", "View", "Sort", "ResolvedHint", "Project", "Repartition"})
_FUNCTIONS = {"Count": "count", "Sum": "sum", "Average": "avg", "Min": "min", "Max": "max"}


def _simple(obj: Any) -> str:
    return str(obj.getClass().getSimpleName()).rstrip("$")


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def _jvm(spark: SparkSession) -> Any:
    jvm = spark._jvm  # noqa: SLF001
    assert jvm is not None
    return jvm


def table_of(relation: Any) -> str:
    catalog, ident = relation.catalog(), relation.identifier()
    if catalog.isDefined() and ident.isDefined():
        parts = [catalog.get().name(), *list(ident.get().namespace()), ident.get().name()]
        return ".".join(str(p) for p in parts)
    return str(relation.table().name())


def analysed(df: DataFrame) -> Any:
    return df._jdf.queryExecution().analyzed()  # noqa: SLF001


def occurrences(plan: Any) -> list[str]:
    """The source table of each relation of ``plan``, in the order :func:`substitute` visits them."""
    out: list[str] = []

    def visit(node: Any) -> None:
        if _simple(node) == RELATION:
            out.append(table_of(node))
            return
        for child in _seq(node.children()):
            visit(child)

    visit(plan)
    return out


def _rebuild(spark: SparkSession, plan: Any, replace: Callable[[int, Any], Any]) -> Any:
    counter = [0]

    def visit(node: Any) -> tuple[Any, bool]:
        if _simple(node) == RELATION:
            i = counter[0]
            counter[0] += 1
            return replace(i, node), True
        children = _seq(node.children())
        if not children:
            return node, False
        rebuilt = [visit(c) for c in children]
        if not any(changed for _, changed in rebuilt):
            return node, False
        seq = _jvm(spark).PythonUtils.toSeq([c for c, _ in rebuilt])
        return node.withNewChildren(seq), True

    return visit(plan)[0]


def _with_options(spark: SparkSession, relation: Any, options: dict[str, str]) -> Any:
    jvm = _jvm(spark)
    merged = jvm.java.util.HashMap()
    merged.putAll(relation.options().asCaseSensitiveMap())
    for key in ("snapshot-id", "start-snapshot-id", "end-snapshot-id", "as-of-timestamp"):
        merged.remove(key)
    for key, value in options.items():
        merged.put(key, value)
    new_options = jvm.org.apache.spark.sql.util.CaseInsensitiveStringMap(merged)
    return relation.copy(
        relation.table(), relation.output(), relation.catalog(), relation.identifier(), new_options
    )


def _read(spark: SparkSession, relation: Any, read: Read) -> Any:
    if read.kind == NONE:
        jvm = _jvm(spark)
        false = jvm.org.apache.spark.sql.catalyst.expressions.Literal.FalseLiteral()
        return jvm.org.apache.spark.sql.catalyst.plans.logical.Filter(false, relation)
    if read.kind == CHANGE:
        return _with_options(
            spark, relation, {"start-snapshot-id": str(read.since), "end-snapshot-id": str(read.until)}
        )
    if read.kind in (INSERTED, DELETED):
        return _changelog(spark, relation, read)
    if read.kind == AT and read.snapshot is not None:
        return _with_options(spark, relation, {"snapshot-id": str(read.snapshot)})
    return relation  # AT a table without a snapshot: it is empty, read as it is


class ChangelogColumnsMissing(Exception):
    """A column the query reads is not in the source's changelog (the source's schema changed): the refresh
    is FULL, naming it (``incremental_refresh.attempt``)."""


def _changelog(spark: SparkSession, relation: Any, read: Read) -> Any:
    """The rows Iceberg's changelog marks ``INSERT`` / ``DELETE`` between ``read.since`` (exclusive) and
    ``read.until``, as ``relation``'s columns with its attribute ids (a projection of aliases)."""
    from pyspark.sql import functions as F

    jvm = _jvm(spark)
    name = f"{TableIdentifier.parse(table_of(relation)).quoted}.`changes`"
    kind = "INSERT" if read.kind == INSERTED else "DELETE"
    changes = (
        spark.read.option("start-snapshot-id", str(read.since))
        .option("end-snapshot-id", str(read.until))
        .table(name)
        # Not as a filter Iceberg can push down: its changelog scan binds pushed filters to the table's
        # own schema, which has no _change_type (ValidationException).
        .where(F.concat(F.col("_change_type"), F.lit("")) == F.lit(kind))
    )
    child = analysed(changes)
    by_name = {str(a.name()).lower(): a for a in _seq(child.output())}
    missing = [str(a.name()) for a in _seq(relation.output()) if str(a.name()).lower() not in by_name]
    if missing:  # the source's schema changed since the query was analysed
        raise ChangelogColumnsMissing(
            f"{table_of(relation)}'s changelog has no column {', '.join(missing)} (its schema changed)"
        )
    expressions = jvm.org.apache.spark.sql.catalyst.expressions
    empty = jvm.PythonUtils.toSeq([])
    aliases = []
    for attribute in _seq(relation.output()):
        source = by_name[str(attribute.name()).lower()]
        aliases.append(
            expressions.Alias(
                source,
                attribute.name(),
                attribute.exprId(),
                attribute.qualifier(),
                jvm.scala.Option.empty(),
                empty,
            )
        )
    return jvm.org.apache.spark.sql.catalyst.plans.logical.Project(jvm.PythonUtils.toSeq(aliases), child)


def substitute(spark: SparkSession, plan: Any, reads: Sequence[Read]) -> Any:
    """``plan`` with its i-th relation read as ``reads[i]``."""
    return _rebuild(spark, plan, lambda i, relation: _read(spark, relation, reads[i]))


def frame(spark: SparkSession, plan: Any) -> DataFrame:
    """A DataFrame over a (rebuilt) logical plan; Spark analyses it again (a no-op on resolved nodes)."""
    from pyspark.sql import DataFrame

    jvm = _jvm(spark)
    try:
        jdf = jvm.org.apache.spark.sql.Dataset.ofRows(spark._jsparkSession, plan)  # noqa: SLF001
    except Exception:  # noqa: BLE001 - no static forwarder: the companion object's method
        module = getattr(jvm.org.apache.spark.sql, "Dataset$").__getattr__("MODULE$")
        jdf = module.ofRows(spark._jsparkSession, plan)  # noqa: SLF001
    return DataFrame(jdf, spark)


def column(spark: SparkSession, expression: Any) -> Column:
    """A PySpark Column of a resolved Catalyst expression (its attributes are those of a plan's output)."""
    from pyspark.sql import Column

    return Column(_jvm(spark).org.apache.spark.sql.Column(expression))


# -- the aggregate ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """One aggregate output column: ``function`` (count, sum, avg, min, max) of ``argument`` (a Catalyst
    expression over the aggregate's input), ``type`` its Spark type (``simpleString``); ``argument_key`` the
    argument's canonical form (equal for semantically equal arguments) and whether it can be NULL (a
    ``count`` of an argument that cannot, ``count(*)`` included, counts the group's rows)."""

    column: str
    function: str
    argument: Any
    type: str
    argument_key: str = ""
    nullable: bool = True


@dataclass(frozen=True)
class AggregateShape:
    """A ``GROUP BY`` (or ``DISTINCT``) query as an incremental refresh maintains it: the aggregate node,
    its grouping expressions, the output column of each key (in grouping order), the aggregate slots, and
    every output column in the table's order with the key index or slot it comes from."""

    node: Any
    child: Any
    grouping: tuple[Any, ...]
    key_columns: tuple[str, ...]
    key_types: tuple[str, ...]
    slots: tuple[Slot, ...]
    # Each output column in the table's order: (name, "key" or "slot", index into grouping or slots).
    columns: tuple[tuple[str, str, int], ...]

    @property
    def removal_problem(self) -> str | None:
        """Why removed rows cannot be subtracted from this aggregate (None: they can): a ``min`` / ``max``
        cannot be undone from the value alone, nor a ``DISTINCT`` without counts."""
        if not self.slots:
            return "SELECT DISTINCT keeps no count per row, so a removed row's group may or may not stay"
        extremes = [s.column for s in self.slots if s.function in ("min", "max")]
        if extremes:
            return f"min / max ({', '.join(extremes)}) cannot subtract removed rows"
        return None

    def row_count_slot(self) -> int | None:
        """A ``count`` slot that counts the group's rows (of an argument that cannot be NULL), if any."""
        for j, slot in enumerate(self.slots):
            if slot.function == "count" and not slot.nullable:
                return j
        return None

    def count_slot_of(self, j: int) -> int | None:
        """A ``count`` slot of slot ``j``'s argument (its non-NULL values), if any."""
        key = self.slots[j].argument_key
        for i, slot in enumerate(self.slots):
            if slot.function == "count" and key and slot.argument_key == key:
                return i
        return None

    @property
    def needs_state(self) -> bool:
        """Whether the partials live in a state table beside the dynamic table: an ``avg`` needs the count and
        sum behind it; and subtracting removed rows needs each group's row count (it disappears at 0) and
        each ``sum``'s count of non-NULL values (it is NULL at 0), which the table's own columns hold only
        when the query has a ``count(*)`` and a ``count`` of each summed argument. A query with ``min`` /
        ``max`` keeps no state for removals: those refresh in full anyway."""
        if any(s.function == "avg" for s in self.slots):
            return True
        if self.removal_problem is not None:
            return False
        sums = [j for j, s in enumerate(self.slots) if s.function == "sum"]
        return self.row_count_slot() is None or any(self.count_slot_of(j) is None for j in sums)


def _exprid(named: Any) -> int:
    return int(named.exprId().id())


def aggregate_shape(root: Any) -> AggregateShape | str:
    """The aggregate of the query's plan ``root`` as :class:`AggregateShape`, or why it cannot be merged
    by key as it is (a reason for FULL)."""
    path: list[Any] = []
    node = root
    while _simple(node) not in ("Aggregate", "Distinct"):
        kind = _simple(node)
        if kind == "Filter":
            return "it filters the aggregate's result (HAVING): a group's row may come and go"
        if kind not in _PASS_THROUGH or len(_seq(node.children())) != 1:
            return f"a {kind} above its aggregate"
        path.append(node)
        node = _seq(node.children())[0]
    # Each column of the root, by the aggregate output it passes through.
    outputs = _seq(node.output())
    ids = {_exprid(a): _exprid(a) for a in outputs}
    for above in reversed(path):
        if _simple(above) != "Project":
            continue
        mapped: dict[int, int] = {}
        for item in _seq(above.projectList()):
            kind = _simple(item)
            inner = _seq(item.children())[0] if kind == "Alias" else item
            if _simple(inner) != "AttributeReference" or _exprid(inner) not in ids:
                return f"an expression over the aggregate's result ({item.sql()})"
            mapped[_exprid(item)] = ids[_exprid(inner)]
        ids = mapped
    root_columns = [(str(a.name()), ids.get(_exprid(a))) for a in _seq(root.output())]
    if _simple(node) == "Distinct":
        child = _seq(node.children())[0]
        grouping = tuple(_seq(child.output()))
        by_id = {_exprid(a): i for i, a in enumerate(outputs)}
        types = tuple(str(a.dataType().simpleString()) for a in grouping)
        index = [by_id.get(i, -1) if i is not None else -1 for _, i in root_columns]
        if sorted(set(index)) != list(range(len(outputs))):
            return "a DISTINCT whose columns are not all in the query's result"
        first = {k: c for (c, _), k in reversed(list(zip(root_columns, index, strict=True)))}
        keys = tuple(first[k] for k in range(len(outputs)))
        columns = tuple((c, "key", k) for (c, _), k in zip(root_columns, index, strict=True))
        return AggregateShape(node, child, grouping, keys, types, (), columns)
    return _grouped(node, root_columns)


def _grouped(node: Any, root_columns: list[tuple[str, int | None]]) -> AggregateShape | str:
    child = _seq(node.children())[0]
    grouping = tuple(_seq(node.groupingExpressions()))
    key_columns: list[str | None] = [None] * len(grouping)
    slots: list[Slot] = []
    source: dict[int, tuple[str, int]] = {}  # aggregate output id -> ("key" | "slot", index)
    names = {i: c for c, i in reversed(root_columns)}
    for named in _seq(node.aggregateExpressions()):
        column_name = names.get(_exprid(named))
        if column_name is None:
            continue  # not in the query's result
        inner = _seq(named.children())[0] if _simple(named) == "Alias" else named
        matched = [i for i, g in enumerate(grouping) if bool(inner.semanticEquals(g))]
        if matched:
            key_columns[matched[0]] = key_columns[matched[0]] or column_name
            source[_exprid(named)] = ("key", matched[0])
            continue
        source[_exprid(named)] = ("slot", len(slots))
        if _simple(inner) != "AggregateExpression":
            return f"an expression over aggregates ({named.sql()})"
        function = inner.aggregateFunction()
        name = _FUNCTIONS.get(_simple(function))
        if name is None or bool(inner.isDistinct()) or inner.filter().isDefined():
            return f"an aggregate an incremental refresh does not merge ({inner.sql()})"
        arguments = _seq(function.children())
        if len(arguments) != 1:
            return f"{inner.sql()}: an aggregate of {len(arguments)} arguments"
        argument = arguments[0]
        slots.append(
            Slot(
                column_name,
                name,
                argument,
                str(named.dataType().simpleString()),
                argument_key=str(argument.canonicalized().toString()),
                nullable=bool(argument.nullable()),
            )
        )
    missing = [g.sql() for g, k in zip(grouping, key_columns, strict=True) if k is None]
    if missing:
        return f"a GROUP BY key that is not a column of its result ({', '.join(missing)})"
    keys = tuple(k for k in key_columns if k is not None)
    types = tuple(str(g.dataType().simpleString()) for g in grouping)
    columns = tuple((c, *source[i]) for c, i in root_columns if i is not None)
    if len(columns) != len(root_columns):
        return "a column of its result that is neither a GROUP BY key nor an aggregate"
    return AggregateShape(node, child, grouping, keys, types, tuple(slots), columns)
