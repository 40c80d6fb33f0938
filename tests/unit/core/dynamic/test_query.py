"""A dynamic table's query: one statement, the tables it names, cycles (core.dynamic.query)."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.dynamic.query import check_query, find_cycle, referenced_tables
from airflow_tablemgmt.core.errors import InvalidDeclaration

# --- queries ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ("SELECT 1", "SELECT 1"),
        ("  select a from t ;  ", "select a from t"),
        ("WITH x AS (SELECT 1) SELECT * FROM x", "WITH x AS (SELECT 1) SELECT * FROM x"),
        ("-- daily\nSELECT ';' AS s FROM t", "-- daily\nSELECT ';' AS s FROM t"),
        ("(SELECT 1) UNION ALL (SELECT 2)", "(SELECT 1) UNION ALL (SELECT 2)"),
        ("SELECT `a;b` FROM t /* ; */", "SELECT `a;b` FROM t /* ; */"),
    ],
)
def test_one_query(query: str, kept: str) -> None:
    assert check_query(query) == kept


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("SELECT 1; DROP TABLE t", "more than one statement"),
        ("SELECT 1;;", "more than one statement"),
        ("INSERT INTO t SELECT 1", "it starts with 'INSERT'"),
        ("DROP TABLE t", "it starts with 'DROP'"),
        ("", "must be one Spark SQL query"),
        ("   ", "must be one Spark SQL query"),
        ("SELECT 'x", "unterminated quote"),
        ("SELECT 1 /* x", "unterminated /\\* comment"),
    ],
)
def test_not_one_query(query: str, why: str) -> None:
    with pytest.raises(InvalidDeclaration, match=f"query: .*{why}"):
        check_query(query)


def test_referenced_tables() -> None:
    known = {"lake.db.events", "lake.db.daily", "lake.db.Other"}
    q = "SELECT * FROM lake.db.events e JOIN `lake`.`db`.`daily` d ON e.id = d.id WHERE note = 'lake.db.Other'"
    assert referenced_tables(q, known) == {"lake.db.events", "lake.db.daily"}
    assert referenced_tables("SELECT * FROM LAKE.DB.OTHER", known) == {"lake.db.Other"}
    # a prefix or a longer chain is not the table; nor is a 2-part name or a comment
    assert (
        referenced_tables("SELECT lake.db.events_v2.x FROM lake.db.eventsx -- lake.db.daily", known) == set()
    )
    assert referenced_tables("SELECT * FROM db.daily", known) == set()
    assert referenced_tables("SELECT 1", set()) == set()


def test_find_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
    assert find_cycle({"x": {"y"}, "y": {"z", "w"}, "z": {"y"}, "w": set()}) == ["y", "z", "y"]
    assert find_cycle({}) is None
