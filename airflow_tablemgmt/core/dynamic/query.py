"""A dynamic table's query as text: the Spark SQL tokenizer (one query, no other statement), the
tables it names, and the cycle finder over dynamic tables that read each other."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.text import check_no_nul

# One token at a time: quoted strings, backticked identifiers and comments are skipped as a whole,
# so a ';' or a table name inside them does not count.
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line_comment>--[^\n]*)
  | (?P<block_comment>/\*.*?\*/)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<ident>`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)
  | (?P<dot>\.)
  | (?P<semicolon>;)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_QUERY_STARTS = {"SELECT", "WITH", "FROM", "VALUES", "TABLE"}
QUERY_RULE = "one Spark SQL query (SELECT ..., WITH ... SELECT ...), no other statement"


def _tokens(query: str) -> list[tuple[str, str]]:
    out = []
    for m in _TOKEN.finditer(query):
        kind = m.lastgroup or "other"
        if kind in ("ws", "line_comment", "block_comment"):
            continue
        out.append((kind, m.group()))
    return out


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def check_query(query: str, field: str = "query") -> str:
    """``query`` without a trailing ``;``, if it is one SELECT/WITH query; else an error naming the field."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidDeclaration(f"{field}: must be {QUERY_RULE}, got {query!r}")
    check_no_nul(query, field)
    if "/*" in query and not re.search(r"/\*.*?\*/", query, re.DOTALL):
        raise InvalidDeclaration(f"{field}: has an unterminated /* comment")
    tokens = _tokens(query)
    semis = [i for i, (kind, _) in enumerate(tokens) if kind == "semicolon"]
    if any(i != len(tokens) - 1 for i in semis):
        raise InvalidDeclaration(
            f"{field}: holds more than one statement (';' before the end); allowed: {QUERY_RULE}"
        )
    first = next((t for kind, t in tokens if kind != "other" or t != "("), "")
    if first.upper() not in _QUERY_STARTS:
        raise InvalidDeclaration(f"{field}: must be {QUERY_RULE}; it starts with {first!r}")
    if any(kind == "other" and t in ("'", '"', "`") for kind, t in tokens):
        raise InvalidDeclaration(f"{field}: has an unterminated quote")
    text = query.strip()
    return text[:-1].rstrip() if semis else text


def referenced_tables(query: str, candidates: Collection[str]) -> set[str]:
    """The ``candidates`` (table ids ``cat.ns.name``) that ``query`` names as a whole dotted
    identifier (backticks allowed, case-insensitive as Spark's identifiers). A cheap textual check:
    a table named without its catalog (``ns.name``) is not found; Spark's analysis at creation
    records the exact source tables."""
    wanted = {c.lower(): c for c in candidates}
    if not wanted:
        return set()
    names = (".".join(parts) for parts in _dotted_names(query))
    return {wanted[name.lower()] for name in names if name.lower() in wanted}


def _dotted_names(query: str) -> Iterator[tuple[str, ...]]:
    """The parts of each whole dotted identifier of the query (``a.b.c``, backticks removed), as written."""
    tokens = _tokens(query)
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "ident" or (i > 0 and tokens[i - 1][0] == "dot"):
            i += 1
            continue
        parts = [_unquote(tokens[i][1])]
        j = i + 1
        while j + 1 < len(tokens) and tokens[j][0] == "dot" and tokens[j + 1][0] == "ident":
            parts.append(_unquote(tokens[j + 1][1]))
            j += 2
        yield tuple(parts)
        i = j


def named_tables(query: str) -> set[str]:
    """Every ``catalog.namespace.table`` the query names (a whole dotted identifier of three parts or
    more, a namespace of several levels included; backticks removed), as written. Textual: it also
    finds a column reference of three parts or more."""
    return {".".join(parts) for parts in _dotted_names(query) if len(parts) >= 3}


def find_cycle(edges: Mapping[str, Collection[str]]) -> list[str] | None:
    """A cycle of ``edges`` (node -> the nodes it depends on) as a path ``[a, b, a]``, or None.
    Deterministic: nodes are visited in sorted order."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle is not None:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            cycle = visit(start)
            if cycle is not None:
                return cycle
    return None
