"""Property: no mutation of a valid declarations document makes reading it raise.

Random values of random types (huge ints, nested lists, None, non-ASCII, newlines ...) are put at
random paths of a valid document, replacing, deleting or inserting; the result is read both as
text (YAML) and through the file loader. Every problem must come back as a declaration error.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_tablemgmt.declarations.files import load_declarations
from airflow_tablemgmt.declarations.parse import parse_declarations_text

VALID: dict[str, Any] = {
    "version": 1,
    "catalogs": [
        {"name": "lake", "type": "hadoop", "warehouse": "/data/wh"},
        {"name": "rest_cat", "type": "rest", "properties": {"uri": "http://h:8181", "token": "conn:rest"}},
    ],
    "tables": [
        {
            "catalog": "lake",
            "namespace": "sales",
            "name": "orders",
            "owner": "data",
            "priority": 3,
            "actions": {
                "rewrite-files": {"interval": "1h", "strategy": "sort", "sort-columns": ["ts"]},
                "expire-snapshots": {"older-than": "5d", "retain-last": 2},
                "expire-data": {"column": "ts", "retention": "400d"},
                "delete-orphans": {"older-than": "3d"},
            },
        },
        {"catalog": "lake", "namespace": "sales", "name": "items", "actions": {"compute-stats": {}}},
    ],
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**18, max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        ["99999999999d", "-1d", "0s", "30", "orders\n", "é", "a\nb", "../x", "conn:", "1h", "@daily"]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=10), st.integers()), inner, max_size=4),
    ),
    max_leaves=8,
)


def _containers(doc: Any, out: list[Any]) -> list[Any]:
    if isinstance(doc, dict | list):
        out.append(doc)
        for v in doc.values() if isinstance(doc, dict) else doc:
            _containers(v, out)
    return out


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(VALID)
    if draw(st.integers(0, 20)) == 0:
        return draw(values)  # the whole document replaced
    for _ in range(draw(st.integers(1, 4))):
        containers = _containers(doc, [])
        target = draw(st.sampled_from(containers))
        op = draw(st.sampled_from(["replace", "delete", "insert"]))
        if isinstance(target, dict):
            keys = list(target)
            if op != "insert" and keys:
                key = draw(st.sampled_from(keys))
                if op == "delete":
                    del target[key]
                else:
                    target[key] = draw(values)
            else:
                target[
                    draw(st.one_of(st.text(max_size=10), st.integers(), st.sampled_from(keys or ["x"])))
                ] = draw(values)
        else:
            if op != "insert" and target:
                i = draw(st.integers(0, len(target) - 1))
                if op == "delete":
                    del target[i]
                else:
                    target[i] = draw(values)
            else:
                target.insert(draw(st.integers(0, len(target))), draw(values))
    return doc


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_documents_never_raise(doc: Any) -> None:
    text = yaml.safe_dump(doc, allow_unicode=True)
    loaded = parse_declarations_text(text, "tables.yaml")
    assert isinstance(loaded.errors, list)
    # Whatever loads is valid, and nothing appears that the file did not declare.
    declared = {f"{t.get('catalog')}.{t.get('namespace')}.{t.get('name')}" for t in _tables(doc)}
    assert {t.id for t in loaded.tables} <= declared


@settings(max_examples=60, deadline=None, database=None)
@given(st.binary(max_size=200), st.integers(0, len(yaml.safe_dump(VALID))))
def test_garbled_bytes_never_raise(tmp_path_factory: Any, noise: bytes, at: int) -> None:
    raw = yaml.safe_dump(VALID).encode()
    p = Path(tmp_path_factory.mktemp("fuzz")) / "tables.yaml"
    p.write_bytes(raw[:at] + noise + raw[at:])
    loaded = load_declarations(p)
    assert isinstance(loaded.errors, list)


def _tables(doc: Any) -> list[dict[str, Any]]:
    if isinstance(doc, dict) and isinstance(doc.get("tables"), list):
        return [t for t in doc["tables"] if isinstance(t, dict)]
    return []
