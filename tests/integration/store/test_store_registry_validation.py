"""Nothing invalid is written; a stored row that no longer validates is reported by name, never
fatal to the others; catalogs over one warehouse; declarations files that never prune."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import text

from airflow_tablemgmt.core.errors import InvalidDeclaration, TableMgmtError, UnreadableTable
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.declarations import apply_declarations, load_declarations, parse_declarations_text

pytestmark = pytest.mark.integration

CATALOG = "catalogs: [{name: lake, warehouse: /data/wh}]\n"
TWO = (
    CATALOG
    + "tables:\n  - {catalog: lake, namespace: s, name: a}\n  - {catalog: lake, namespace: s, name: b}\n"
)

# A hadoop catalog on an object store must accept non-atomic commits explicitly.
UNSAFE = {"allow-unsafe-commits": "true"}


def spec(name: str = "t", **actions: object) -> TableSpec:
    return TableSpec.model_validate({"catalog": "lake", "namespace": "s", "name": name, "actions": actions})


def live_ids(store) -> list[str]:
    return [t.table_id for t in store.tables.list()]


# -- item 15: validate before every write ---------------------------------------------------------


def test_table_upsert_revalidates_and_writes_nothing_invalid(store):
    good = spec("t", **{"expire-data": {"column": "c", "retention": "400d"}})
    # A spec that skipped validation (model_construct / model_copy(update=...)): a 30-second TTL.
    bad = good.model_copy(update={"actions": {"expire-data": {"column": "c", "retention": 30}}})
    with pytest.raises(InvalidDeclaration, match=r"lake\.s\.t.*expire-data\.retention.*no unit.*'30d'"):
        store.tables.upsert(bad, Owner.STORE)
    assert live_ids(store) == []
    evil = good.model_copy(update={"name": "t\n"})
    with pytest.raises(InvalidDeclaration, match="not a valid identifier"):
        store.tables.upsert(evil, Owner.STORE)
    assert store.tables.list_with_errors() == ([], [])


def test_catalog_upsert_revalidates_secrets_and_paths(store):
    ok = CatalogSpec(name="r", type="rest", properties={"uri": "http://h", "token": "conn:r"})
    leaky = ok.model_copy(update={"properties": {"uri": "http://h", "token": "plaintext"}})
    with pytest.raises(InvalidDeclaration, match=r"properties\.token: a secret must be given as a reference"):
        store.catalogs.upsert(leaky, Owner.STORE)
    relative = CatalogSpec(name="lake", warehouse="/w").model_copy(update={"warehouse": "../../tmp"})
    with pytest.raises(InvalidDeclaration, match="warehouse: '../../tmp' is relative"):
        store.catalogs.upsert(relative, Owner.STORE)
    assert store.catalogs.list() == []


def _corrupt(store, table_id: str, spec_json: str) -> None:
    # What an older version could have written: the spec column no longer validates.
    with store.engine.begin() as conn:
        conn.execute(
            text("UPDATE tms_table SET spec = :s WHERE table_id = :t"), {"s": spec_json, "t": table_id}
        )


@pytest.mark.parametrize(
    ("spec_json", "field"),
    [
        (
            '{"catalog": "lake", "namespace": "s", "name": "bad", "actions": '
            '{"expire-data": {"column": "c", "retention": "-1s"}}}',
            "actions.expire-data.retention",
        ),
        ('{"catalog": "lake", "namespace": "s", "name": "bad", "actions": {"vacuum-all": {}}}', "actions"),
    ],
)
def test_a_row_that_no_longer_validates_is_reported_by_name(store, spec_json: str, field: str):
    for name in ("a", "bad", "z"):
        store.tables.upsert(spec(name), Owner.STORE)
    _corrupt(store, "lake.s.bad", spec_json)
    assert live_ids(store) == ["lake.s.a", "lake.s.z"]  # list() skips it, never raises
    rows, errors = store.tables.list_with_errors()
    assert [r.table_id for r in rows] == ["lake.s.a", "lake.s.z"]
    assert [e.table_id for e in errors] == ["lake.s.bad"]
    assert "table lake.s.bad" in errors[0].message and field in errors[0].message
    with pytest.raises(UnreadableTable, match=rf"table lake\.s\.bad: .*{field}") as e:
        store.tables.get("lake.s.bad")
    assert isinstance(e.value, TableMgmtError)
    # Re-registering it with a valid spec repairs the row.
    assert store.tables.upsert(spec("bad"), Owner.STORE) == "updated"
    assert live_ids(store) == ["lake.s.a", "lake.s.bad", "lake.s.z"]


# -- item 17: one warehouse, one catalog ----------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"warehouse": "/data/wh"}, {"warehouse": "/data/wh/"}),
        ({"warehouse": "/data/wh"}, {"warehouse": "file:///data/wh"}),
        (
            {"warehouse": "s3://bkt/wh", "properties": UNSAFE},
            {"warehouse": "s3a://bkt/wh", "properties": UNSAFE},
        ),
        (
            {"type": "rest", "properties": {"uri": "http://h:8181"}},
            {"type": "rest", "properties": {"uri": "http://h:8181/"}},
        ),
    ],
)
def test_second_catalog_over_the_same_warehouse_is_rejected(store, first: dict, second: dict):
    store.catalogs.upsert(CatalogSpec(name="lake", **first), Owner.CODE)
    with pytest.raises(InvalidDeclaration, match=r"catalog lake2: .*same tables as catalog lake\b"):
        store.catalogs.upsert(CatalogSpec(name="lake2", **second), Owner.STORE)
    assert [c.name for c in store.catalogs.list()] == ["lake"]
    # Re-upserting the same catalog (or changing it in place) is fine.
    assert store.catalogs.upsert(CatalogSpec(name="lake", **first), Owner.CODE) is False
    assert store.catalogs.upsert(CatalogSpec(name="lake", **second), Owner.CODE) is True
    store.catalogs.upsert(CatalogSpec(name="other", warehouse="/data/other"), Owner.STORE)
    assert [c.name for c in store.catalogs.list()] == ["lake", "other"]


def test_moving_a_catalog_onto_anothers_warehouse_is_rejected(store):
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/a"), Owner.STORE)
    store.catalogs.upsert(CatalogSpec(name="lake2", warehouse="/b"), Owner.STORE)
    with pytest.raises(InvalidDeclaration, match="same tables as catalog lake"):
        store.catalogs.upsert(CatalogSpec(name="lake2", warehouse="/a/"), Owner.STORE)
    assert store.catalogs.get("lake2").warehouse == "/b"


# -- items 3 and 18: only a clean file with an explicit, non-empty table list prunes -----------------


def _files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "missing": tmp_path / "missing.yaml",
        "empty": tmp_path / "empty.yaml",
        "braces": tmp_path / "braces.yaml",
        "null": tmp_path / "null.yaml",
        "catalogs only": tmp_path / "catalogs.yaml",
        "yaml error": tmp_path / "broken.yaml",
        "not utf-8": tmp_path / "latin1.yaml",
        "directory": tmp_path / "dir.yaml",
        "broken symlink": tmp_path / "link.yaml",
        "under a file": tmp_path / "afile" / "tables.yaml",
        "one bad entry": tmp_path / "bad_entry.yaml",
    }
    files["empty"].write_text("")
    files["braces"].write_text("{}")
    files["null"].write_text("null\n")
    files["catalogs only"].write_text(CATALOG)
    files["yaml error"].write_text(CATALOG + "tables: [\n")
    files["not utf-8"].write_bytes((CATALOG + "tables: []\n# caf").encode() + b"\xe9\n")
    files["directory"].mkdir()
    os.symlink(tmp_path / "nowhere.yaml", files["broken symlink"])
    (tmp_path / "afile").write_text("x")
    files["one bad entry"].write_text(
        CATALOG + "tables:\n  - {catalog: lake, namespace: s, name: a, priority: 0}\n"
    )
    return files


def test_no_unreadable_empty_or_missing_file_ever_prunes(store, tmp_path: Path):
    apply_declarations(store, parse_declarations_text(TWO, "t.yaml"))
    assert live_ids(store) == ["lake.s.a", "lake.s.b"]
    for what, path in _files(tmp_path).items():
        loaded = load_declarations(path)
        report = apply_declarations(store, loaded, prune=True, allow_empty_prune=True)
        assert report.removed == [], what
        assert live_ids(store) == ["lake.s.a", "lake.s.b"], what


def test_explicit_empty_list_prunes_only_when_asked(store):
    apply_declarations(store, parse_declarations_text(TWO, "t.yaml"))
    empty = parse_declarations_text(CATALOG + "tables: []\n", "t.yaml")
    assert apply_declarations(store, empty).removed == []
    assert live_ids(store) == ["lake.s.a", "lake.s.b"]
    assert apply_declarations(store, empty, allow_empty_prune=True).removed == ["lake.s.a", "lake.s.b"]
    assert live_ids(store) == []


def test_a_clean_non_empty_file_prunes_what_it_no_longer_declares(store):
    apply_declarations(store, parse_declarations_text(TWO, "t.yaml"))
    one = parse_declarations_text(CATALOG + "tables: [{catalog: lake, namespace: s, name: a}]\n", "t.yaml")
    assert apply_declarations(store, one, prune=False).removed == []
    assert apply_declarations(store, one).removed == ["lake.s.b"]
    assert live_ids(store) == ["lake.s.a"]
