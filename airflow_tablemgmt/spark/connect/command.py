"""A SQL command's result rows on a Spark Connect session, from the command's own response.

``spark.sql(<command>)`` on Connect runs the command at once and answers its rows as a local relation in
that response (``sql_command_result``, Arrow IPC); ``collect()`` on the DataFrame it returns sends them back
to the server in a second ``ExecutePlan`` and reads them again. A procedure call of a small table's job is
≈ 0.15 s of server time; that second round trip was ≈ 5-10 % of it (issue 40: a batch's jobs, one after
another on one session). The rows are read from the first answer here; a result that is not plain (not a
local relation, or a column that is not a number, a string or a boolean) is collected as before.

A leaf of the driver program (``spark/job/procedures.py``): pyspark and pyarrow are imported inside the call.
"""

from __future__ import annotations

from typing import Any


def command_rows(session: Any, sql: str) -> list[dict[str, Any]]:
    """Run the SQL command ``sql`` on the remote ``session``; its result rows as dicts."""
    from pyspark.sql.connect.dataframe import DataFrame
    from pyspark.sql.connect.plan import SQL, CachedRelation

    client = session.client
    _, properties = client.execute_command(SQL(sql).command(client))
    relation = properties.get("sql_command_result")
    rows = _plain_rows(relation) if relation is not None else None
    if rows is not None:
        return rows
    # a query (no command result: run as spark.sql would), or a result that is not plain: collected
    plan = SQL(sql) if relation is None else CachedRelation(relation)
    return [row.asDict(recursive=True) for row in DataFrame.withPlan(plan, session).collect()]


def _plain_rows(relation: Any) -> list[dict[str, Any]] | None:
    """The rows of a local relation whose columns are all numbers, strings or booleans; else None."""
    if relation.WhichOneof("rel_type") != "local_relation" or not relation.local_relation.HasField("data"):
        return None
    import pyarrow as pa

    table = pa.ipc.open_stream(relation.local_relation.data).read_all()
    types = pa.types
    for column in table.schema:
        t = column.type
        if not (types.is_integer(t) or types.is_floating(t) or types.is_string(t) or types.is_boolean(t)):
            return None
    return table.to_pylist()


__all__ = ["command_rows"]
