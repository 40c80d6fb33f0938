from airflow_tablemgmt.declarations.parse import parse_declarations_text

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


OK_TABLE = "  - {catalog: lake, namespace: db, name: ok}\n"


def test_one_bad_entry_never_hides_the_others() -> None:
    bad_entries = [
        "  - {catalog: lake, namespace: db, name: ttl, actions: {expire-data: {column: c, retention: 99999999999d}}}\n",
        "  - [catalog, lake]\n",
        "  - just a string\n",
        "  - {1: 2, catalog: lake}\n",
        '  - {catalog: lake, namespace: db, name: "orders\\n"}\n',
        "  - {catalog: lake, namespace: db, name: x, priority: 99999999999999999999999}\n",
        "  - {catalog: lake, namespace: db, name: y, actions: [rewrite-files]}\n",
        "  - {catalog: lake, namespace: db, name: z, actions: {rewrite-files: 5}}\n",
    ]
    for entry in bad_entries:
        text = "catalogs: [{name: lake, warehouse: /w}]\ntables:\n" + entry + OK_TABLE
        loaded = parse_declarations_text(text, "t.yaml")
        assert [t.id for t in loaded.tables] == ["lake.db.ok"], entry
        assert len(loaded.errors) == 1 and loaded.errors[0].message.startswith("t.yaml: tables[0]"), entry


def test_overflowing_retention_is_that_tables_field_error() -> None:
    text = (
        "catalogs: [{name: lake, warehouse: /w}]\ntables:\n"
        "  - {catalog: lake, namespace: db, name: ttl, actions: {expire-data: {column: c, retention: 99999999999d}}}\n"
    )
    (err,) = parse_declarations_text(text, "t.yaml").errors
    assert err.table == "lake.db.ttl"
    assert err.message == (
        "t.yaml: tables[0].actions.expire-data.retention (table lake.db.ttl): '99999999999d' is too large; at most 36500d"
    )


def test_top_level_shapes_are_errors_of_the_file() -> None:
    for text, expected in (
        ("catalogs: 5\n" + "tables:\n" + OK_TABLE, "catalogs: expected a list of catalogs, got int"),
        ("catalogs: {lake: 5}\ntables: []", "catalogs.lake"),
        ("tables: {a: 1}", "tables: expected a list of tables, got dict"),
        ("{1: 2}", "unknown top-level keys ['1']"),
        ("version: 2", "version: must be 1, got 2"),
    ):
        loaded = parse_declarations_text(text, "t.yaml")
        assert any(expected in e.message for e in loaded.errors), (text, loaded.errors)


def test_catalogs_declared_twice_or_over_one_warehouse_are_errors_of_the_second() -> None:
    text = (
        "catalogs:\n  - {name: lake, warehouse: /data/wh}\n  - {name: lake2, warehouse: 'file:///data/wh/'}\n"
        "  - {name: lake, warehouse: /other}\n"
        "tables:\n  - {catalog: lake, namespace: s, name: t}\n  - {catalog: lake2, namespace: s, name: t}\n"
    )
    loaded = parse_declarations_text(text, "t.yaml")
    assert [c.name for c in loaded.catalogs] == ["lake"]
    msgs = [e.message for e in loaded.errors]
    assert "catalogs[1] (catalog lake2): reaches the same tables as catalog lake" in msgs[0]
    assert "catalogs[2] (catalog lake): declared twice" in msgs[1]
    assert (
        "tables[1].catalog (table lake2.s.t): 'lake2' is not declared (its declaration has errors)" in msgs[2]
    )
    assert [t.id for t in loaded.tables] == ["lake.s.t"]
