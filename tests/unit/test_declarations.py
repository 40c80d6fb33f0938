from airflow_tablemgmt.declarations import parse_declarations_text

GOOD = """
catalogs:
  - {name: lake, type: hadoop, warehouse: /tmp/wh}
tables:
  - {catalog: lake, namespace: db, name: a, actions: {rewrite-files: {}}}
  - {catalog: lake, namespace: db, name: b, actions: {expire-snapshots: {retain-last: 0}}}
  - {catalog: nope, namespace: db, name: c}
  - {catalog: lake, namespace: db, name: a}
  - {catalog: lake, namespace: db, name: d, actions: {delete-orphans: {}}}
"""


def test_each_table_validated_on_its_own() -> None:
    loaded = parse_declarations_text(GOOD, "dags/tables.yaml")
    assert [t.id for t in loaded.tables] == ["lake.db.a", "lake.db.d"]
    msgs = [e.message for e in loaded.errors]
    assert msgs[0] == (
        "dags/tables.yaml: tables[1].actions.expire-snapshots.retain-last (table lake.db.b): "
        "Input should be greater than or equal to 1, got 0"
    )
    assert "tables[2].catalog (table nope.db.c): 'nope' is not declared; declared catalogs: lake" in msgs[1]
    assert "tables[3] (table lake.db.a): declared twice" in msgs[2]
    assert [e.table for e in loaded.errors] == ["lake.db.b", "nope.db.c", "lake.db.a"]


def test_bad_yaml_and_unknown_keys() -> None:
    assert "not valid YAML" in parse_declarations_text("tables: [", "f.yaml").errors[0].message
    loaded = parse_declarations_text("tabels: []", "f.yaml")
    assert "unknown top-level keys ['tabels']" in loaded.errors[0].message


def test_mapping_form_of_catalogs_and_digest_stable() -> None:
    text = "catalogs: {lake: {warehouse: /w}}\ntables: [{catalog: lake, namespace: n, name: t}]"
    a, b = parse_declarations_text(text, "x"), parse_declarations_text(text, "x")
    assert a.catalogs[0].name == "lake" and not a.errors
    assert a.digest == b.digest
