"""What a dynamic table's user SQL may ask of the session it runs in (DESIGN: *User SQL is user code*).

The query itself is checked on Spark's analysed plan inside the refresh job (``spark.job.query_policy``);
this module holds the pure rules both sides share:

* the session settings a refresh forces whatever the request says (``FORCED_SESSION``): Spark's SQL on
  files is off, so ``SELECT * FROM text.`/etc/passwd``` has no file source to resolve to, and Spark's
  variable substitution is off, so ``'${env:NAME}'`` / ``'${system:java.class.path}'`` stay the literal
  text the query author wrote instead of becoming the driver's environment;
* which ``spark.sql.*`` dynamic options a refresh request may set. A key that could widen what the
  query reaches — a new catalog (``spark.sql.catalog.<name>`` loads any class with any options), SQL
  on files, variable substitution, the default catalog, legacy analysis rules, Hive, log redaction — is
  refused, naming the key, when the request is made (REST, CLI) and again inside the job;
* the allow-lists of the plan check (:data:`ALLOWED_PLAN_NODES`, :data:`STRUCTURAL_EXPRESSIONS`,
  :data:`DENIED_FUNCTIONS`): an analysed plan is accepted only if every node and every expression is
  one of these, or a function of Spark's built-in registry other than the denied ones. Anything else —
  a script transformation, a user-defined function, a node a new Spark version adds — is refused by
  default;
* the job's wall clock (:data:`TIMEOUT_OPTION`): how long a refresh or create job may run before the
  job cancels its Spark work and fails naming the limit.
"""

from __future__ import annotations

import math
from typing import Any

SESSION_PREFIX = "spark.sql."
FORCED_SESSION: dict[str, str] = {
    "spark.sql.runSQLOnFiles": "false",
    "spark.sql.variable.substitute": "false",
}
# Lower-cased: Spark's SQL configuration keys are matched case-sensitively, but a refusal must not
# depend on the spelling.
DENIED_SESSION_PREFIXES: tuple[str, ...] = (
    "spark.sql.catalog.",
    "spark.sql.catalogimplementation",
    "spark.sql.defaultcatalog",
    "spark.sql.runsqlonfiles",
    "spark.sql.variable.",
    "spark.sql.legacy.",
    "spark.sql.hive.",
    "spark.sql.redaction.",
    "spark.sql.extensions",
    "spark.sql.warehouse.dir",
    "spark.sql.queryexecutionlisteners",
    "spark.sql.streaming.",
)

# -- the plan check's allow-lists (Spark 3.5 class names) -------------------------------------------

LOGICAL = "org.apache.spark.sql.catalyst.plans.logical."
EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions."
TABLE_RELATION = "org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation"
# Leaves whose rows the query spells out itself (VALUES, range(), SELECT without FROM) or that refer to
# a CTE defined (and walked) in the same plan.
DATA_LEAVES = frozenset(LOGICAL + n for n in ("OneRowRelation", "LocalRelation", "Range", "CTERelationRef"))
# What a dynamic table's query needs: projection, filter, aggregate, join, window, sort, limit, set
# operations, deduplication, expand (grouping sets, unpivot), generate (its generator is an expression,
# allowed only if built in), aliases, views, CTEs, hints and sampling. A table is allowed only as a
# DataSourceV2Relation of a registered catalog (checked by the job).
ALLOWED_PLAN_NODES = (
    frozenset(
        LOGICAL + n
        for n in (
            "Project",
            "Filter",
            "Aggregate",
            "Join",
            "LateralJoin",
            "Window",
            "Sort",
            "GlobalLimit",
            "LocalLimit",
            "Offset",
            "Union",
            "Intersect",
            "Except",
            "Distinct",
            "Deduplicate",
            "Expand",
            "Generate",
            "SubqueryAlias",
            "View",
            "WithCTE",
            "CTERelationDef",
            "ResolvedHint",
            "Repartition",
            "RepartitionByExpression",
            "RebalancePartitions",
            "Sample",
        )
    )
    | DATA_LEAVES
    | {TABLE_RELATION}
)
# Expressions a plan is made of that are not functions of Spark's registry (columns, literals,
# aliases, subqueries, lambdas, window specifications, field access), and the classes built-in
# functions and operators analyse to when their registered name is a builder or a rewrite (``ceil``
# to RoundCeil, ``date + interval`` to TimeAdd, ``explode`` to Explode, ``try_add`` to TryEval …).
STRUCTURAL_EXPRESSIONS = frozenset(
    EXPRESSIONS + n
    for n in (
        "AttributeReference",
        "Alias",
        "Literal",
        "TypedNullLiteral",
        "KnownNullable",
        "KnownNotNull",
        "PreciseTimestampConversion",
        "SortOrder",
        "WindowExpression",
        "WindowSpecDefinition",
        "SpecifiedWindowFrame",
        "UnspecifiedFrame$",
        "CurrentRow$",
        "UnboundedPreceding$",
        "UnboundedFollowing$",
        "aggregate.AggregateExpression",
        "aggregate.PivotFirst",
        "aggregate.PercentileCont",
        "aggregate.PercentileDisc",
        "aggregate.CountMinSketchAgg",
        "ScalarSubquery",
        "Exists",
        "ListQuery",
        "InSubquery",
        "LateralSubquery",
        "OuterReference",
        "NamedLambdaVariable",
        "LambdaFunction",
        "GetStructField",
        "GetArrayItem",
        "GetMapValue",
        "GetArrayStructFields",
        "Explode",
        "PosExplode",
        "Inline",
        "Stack",
        "JsonTuple",
        "TimeAdd",
        "DateAddInterval",
        "DateAddYMInterval",
        "TimestampAddYMInterval",
        "DatetimeSub",
        "SubtractDates",
        "SubtractTimestamps",
        "TimestampAdd",
        "TimestampDiff",
        "ExtractANSIIntervalYears",
        "ExtractANSIIntervalMonths",
        "ExtractANSIIntervalDays",
        "ExtractANSIIntervalHours",
        "ExtractANSIIntervalMinutes",
        "ExtractANSIIntervalSeconds",
        "ExtractIntervalYears",
        "ExtractIntervalMonths",
        "ExtractIntervalDays",
        "ExtractIntervalHours",
        "ExtractIntervalMinutes",
        "ExtractIntervalSeconds",
        "SecondWithFraction",
        "MultiplyYMInterval",
        "MultiplyDTInterval",
        "DivideYMInterval",
        "DivideDTInterval",
        "MultiplyInterval",
        "DivideInterval",
        "TryEval",
        "Ceil",
        "Floor",
        "RoundCeil",
        "RoundFloor",
        "StringLPad",
        "StringRPad",
        "BinaryPad",
        "Contains",
        "StartsWith",
        "EndsWith",
        "BinaryPredicate",
        "Mask",
        "StringDecode",
        "LikeAll",
        "NotLikeAll",
        "LikeAny",
        "NotLikeAny",
    )
)
# Built-in functions that stay refused: they call any Java method by reflection (e.g.
# java.lang.System.getenv, java.lang.Runtime.exec).
DENIED_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})
# Friendlier names for refused expression classes a query author may meet (simple class names).
REFUSED_EXPRESSIONS: dict[str, str] = {
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
    "UserDefinedGenerator": "a user-defined generator",
}
# Refused plan nodes with a reason of their own (simple class names).
REFUSED_NODES: dict[str, str] = {
    "ScriptTransformation": (
        "a script transformation (TRANSFORM / MAP / REDUCE … USING runs a program on the Spark host)"
    ),
    "HiveScriptTransformation": "a script transformation (… USING runs a program on the Spark host)",
}


def allowed_expressions(registry: dict[str, set[str]]) -> frozenset[str]:
    """The expression classes a query may use: ``registry`` (class name -> the built-in function names
    registered for it) minus the classes of :data:`DENIED_FUNCTIONS`, plus :data:`STRUCTURAL_EXPRESSIONS`."""
    functions = {cls for cls, names in registry.items() if not names & DENIED_FUNCTIONS}
    return frozenset(functions) | STRUCTURAL_EXPRESSIONS


def node_refusal(class_name: str) -> str:
    """What to call a plan node that is not allowed (``class_name`` is its full JVM class name)."""
    simple = class_name.rsplit(".", 1)[-1]
    if simple in REFUSED_NODES:
        return REFUSED_NODES[simple]
    if simple.endswith(("Command", "Statement")):
        return f"the command {simple}"
    return f"a {simple} node ({class_name}), which is not on the allow-list of a dynamic table's plan"


def expression_refusal(class_name: str, registry: dict[str, set[str]]) -> str:
    """What to call an expression that is not allowed: its function name(s) when it is a registered
    function (``reflect``), a description when known (a user-defined function), else its class."""
    simple = class_name.rsplit(".", 1)[-1]
    if simple in REFUSED_EXPRESSIONS:
        return REFUSED_EXPRESSIONS[simple]
    names = sorted(registry.get(class_name, ()))
    if names:
        return f"the function {' / '.join(names)}"
    return f"the expression {simple} ({class_name}), which is not one of Spark's built-in functions"


# -- the job's wall clock ----------------------------------------------------------------------------

# The refresh job's option (``JobSpec.options["timeout_seconds"]``): seconds the job's Spark work may
# take; absent or null means no limit. The DAG side sets it with the task's execution_timeout.
TIMEOUT_OPTION = "timeout_seconds"


def parse_timeout(value: Any, field: str = TIMEOUT_OPTION) -> float | None:
    """``value`` as a positive number of seconds, or None (no limit); anything else names the field."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{field}: expected a positive number of seconds or null, got {value!r}")
    return float(value)


def session_option_refusal(key: str, field: str = "dynamicOptions") -> str | None:
    """Why the dynamic option ``key`` may not be set on a refresh's session, or None when it may.

    Keys outside ``spark.sql.`` are Iceberg write options and are not session settings at all."""
    lowered = key.strip().lower()
    if not lowered.startswith(SESSION_PREFIX):
        return None
    for prefix in DENIED_SESSION_PREFIXES:
        if lowered.startswith(prefix):
            return (
                f"{field}.{key}: a refresh may not set {prefix.rstrip('.')}* (it would let the query reach "
                "more than the tables of registered catalogs); allowed: other spark.sql.* settings such as "
                "spark.sql.shuffle.partitions, and Iceberg write options such as write-format"
            )
    return None
