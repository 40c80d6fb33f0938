"""``dynamic-tables:`` in tables.yaml: validated per entry, checked as a set (downstream needs an
upstream, no cycles), synced into the store (owned by code, CREATING), pruned by the tables' rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_tablemgmt.core.dynamic import DynamicTableSpec
from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.naming import BROKEN_DAG_ID
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build
from airflow_tablemgmt.declarations.parse import parse_declarations_text
from airflow_tablemgmt.declarations.sync import apply_declarations
from airflow_tablemgmt.store import Store

CATALOG = "catalogs: [{name: lake, warehouse: /data/wh}]\n"
DAILY = """  - identifier: lake.db.daily
    query: SELECT day, count(*) AS n FROM lake.db.events GROUP BY day
    freshness: 1 DAY
    partitioned-by: [day]
    partition.fields.day.date-formatter: yyyy-MM-dd
"""
WEEKLY = """  - identifier: lake.db.weekly
    query: SELECT weekofyear(day) AS w, sum(n) AS n FROM lake.db.daily GROUP BY 1
    freshness: downstream
"""
DOC = CATALOG + "tables:\n  - {catalog: lake, namespace: db, name: events, actions: {expire-snapshots: {}}}\n"
DOC += "dynamic-tables:\n" + DAILY + WEEKLY
REFRESH_DAILY = "tms__lake.db.daily__refresh"
REFRESH_WEEKLY = "tms__lake.db.weekly__refresh"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


def test_parse_keeps_each_dynamic_table_with_its_view() -> None:
    loaded = parse_declarations_text(DOC, "t.yaml")
    assert loaded.errors == []
    assert [d.id for d in loaded.dynamic_tables] == ["lake.db.daily", "lake.db.weekly"]
    assert [t.id for t in loaded.tables] == ["lake.db.events", "lake.db.daily", "lake.db.weekly"]
    daily = loaded.tables[1].action_settings("refresh")
    assert (daily.interval, daily.trigger) == ("0 0 * * *", "schedule")
    assert loaded.dynamic_tables[0].formatters == {"day": "yyyy-MM-dd"}
    assert loaded.may_prune() and loaded.declares_tables


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "  - {identifier: lake.db.bad, query: SELECT 1, freshness: 7 MINUTE}\n",
            "t.yaml: dynamic-tables[1].freshness (dynamic table lake.db.bad): '7 MINUTE' cannot be a full-refresh "
            "cron: a freshness in MINUTES must divide 60; allowed for MINUTE: 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60",
        ),
        (
            "  - {identifier: lake.db.bad, query: SELECT 1, freshness: 1 HOUR, refresh-mode: continuous}\n",
            "t.yaml: dynamic-tables[1].refresh-mode (dynamic table lake.db.bad): 'continuous' is not a refresh "
            "mode; allowed: AUTO (the default: incremental where the query allows it, else full, recording why), "
            "FULL or INCREMENTAL",
        ),
        (
            "  - {identifier: lake.db.bad, query: 'SELECT 1; DROP TABLE x', freshness: 1 HOUR}\n",
            "dynamic-tables[1].query (dynamic table lake.db.bad): holds more than one statement",
        ),
        (
            "  - {identifier: lake.db.bad, query: SELECT 1, freshness: 1 HOUR, partition.fields.h.date-formatter: HH}\n",
            "dynamic-tables[1].partition-fields.h (dynamic table lake.db.bad): 'h' has a date formatter but is not "
            "in partitioned-by",
        ),
        (
            "  - {identifier: other.db.bad, query: SELECT 1, freshness: 1 HOUR}\n",
            "dynamic-tables[1].catalog (dynamic table other.db.bad): 'other' is not declared; declared catalogs: lake",
        ),
        (
            "  - {identifier: lake.db.daily, query: SELECT 1, freshness: 1 HOUR}\n",
            "dynamic-tables[1] (dynamic table lake.db.daily): declared twice",
        ),
        (
            "  - {identifier: lake.db.bad, query: SELECT 1, freshness: downstream}\n",
            "dynamic-tables[1] (dynamic table lake.db.bad): freshness: downstream needs an upstream dynamic table",
        ),
        (
            "  - {identifier: lake.db.bad, query: SELECT 1, freshness: 1 HOUR, interval: 1h}\n",
            "dynamic-tables[1].interval (dynamic table lake.db.bad): Extra inputs are not permitted",
        ),
    ],
)
def test_one_bad_entry_names_file_and_table_and_the_others_load(entry: str, message: str) -> None:
    loaded = parse_declarations_text(CATALOG + "dynamic-tables:\n" + DAILY + entry, "t.yaml")
    assert [d.id for d in loaded.dynamic_tables] == ["lake.db.daily"]
    assert len(loaded.errors) == 1 and message in loaded.errors[0].message, loaded.errors[0].message
    assert not loaded.may_prune()


def test_refresh_mode_in_tables_yaml_defaults_to_auto_and_takes_any_case() -> None:
    loaded = parse_declarations_text(
        CATALOG
        + "dynamic-tables:\n"
        + DAILY
        + WEEKLY.replace("freshness:", "refresh-mode: incremental\n    freshness:"),
        "t.yaml",
    )
    assert not loaded.errors, loaded.errors
    assert {d.id: str(d.refresh_mode) for d in loaded.dynamic_tables} == {
        "lake.db.daily": "AUTO",
        "lake.db.weekly": "INCREMENTAL",
    }


def test_dynamic_tables_must_be_a_list() -> None:
    loaded = parse_declarations_text(CATALOG + "dynamic-tables: {a: 1}\n", "t.yaml")
    assert loaded.errors[0].message == "t.yaml: dynamic-tables: expected a list of dynamic tables, got dict"
    assert not loaded.may_prune() and not loaded.declares_tables


def test_a_plain_table_declaring_refresh_is_rejected() -> None:
    doc = (
        CATALOG + "tables:\n  - {catalog: lake, namespace: db, name: t, actions: {refresh: {interval: 1h}}}\n"
    )
    loaded = parse_declarations_text(doc, "t.yaml")
    assert loaded.tables == []
    assert (
        "t.yaml: tables[0].actions (table lake.db.t): refresh: only dynamic tables refresh; declare it under "
        "dynamic-tables:" in loaded.errors[0].message
    )


def test_a_table_and_a_dynamic_table_of_one_id() -> None:
    doc = CATALOG + "tables:\n  - {catalog: lake, namespace: db, name: daily}\ndynamic-tables:\n" + DAILY
    loaded = parse_declarations_text(doc, "t.yaml")
    assert [t.id for t in loaded.tables] == ["lake.db.daily"] and loaded.dynamic_tables == []
    assert "dynamic-tables[0] (dynamic table lake.db.daily): declared twice" in loaded.errors[0].message


# --- the set: upstreams and cycles, across files and the store -----------------------------------


def test_cycle_is_rejected_naming_it(store: Store, tmp_path: Path) -> None:
    a = "  - {identifier: lake.db.a, query: SELECT * FROM lake.db.b, freshness: downstream}\n"
    b = "  - {identifier: lake.db.b, query: SELECT * FROM lake.db.a, freshness: 1 HOUR}\n"
    y = tmp_path / "tables.yaml"
    y.write_text(CATALOG + "dynamic-tables:\n" + DAILY + a + b)
    result = load_registry_and_build(y, store=store)
    cycle = [e for e in result.errors if "cycle" in e]
    assert len(cycle) == 2 and all("lake.db.a -> lake.db.b -> lake.db.a" in e for e in cycle), result.errors
    assert {d.id for d in store.dynamic.list()} == {"lake.db.daily"}
    assert REFRESH_DAILY in result.dags and BROKEN_DAG_ID in result.dags
    assert "tms__lake.db.a__refresh" not in result.dags


def test_downstream_of_a_store_dynamic_table_and_cycle_through_it(store: Store, tmp_path: Path) -> None:
    store.catalogs.upsert(parse_declarations_text(CATALOG, "c").catalogs[0], Owner.STORE)
    rest = DynamicTableSpec.model_validate(
        {"identifier": "lake.db.rest", "query": "SELECT * FROM lake.db.downstream_one", "freshness": "1 HOUR"}
    )
    store.dynamic.upsert(rest, Owner.STORE)
    y = tmp_path / "tables.yaml"
    y.write_text(
        CATALOG + "dynamic-tables:\n"
        "  - {identifier: lake.db.downstream_one, query: SELECT * FROM lake.db.rest, freshness: downstream}\n"
    )
    result = load_registry_and_build(y, store=store)
    assert any(
        "cycle: lake.db.downstream_one -> lake.db.rest -> lake.db.downstream_one" in e for e in result.errors
    )
    # Without the cycle, the store's dynamic table is a valid upstream.
    store.dynamic.upsert(rest.model_copy(update={"query": "SELECT 1"}), Owner.STORE)
    result = load_registry_and_build(y, store=store)
    assert result.errors == [] and "tms__lake.db.downstream_one__refresh" in result.dags


def test_downstream_without_dynamic_upstream_lists_the_dynamic_tables(store: Store, tmp_path: Path) -> None:
    y = tmp_path / "tables.yaml"
    bad = "  - {identifier: lake.db.x, query: SELECT * FROM lake.db.events, freshness: downstream}\n"
    y.write_text(CATALOG + "dynamic-tables:\n" + DAILY + bad)
    result = load_registry_and_build(y, store=store)
    [err] = result.errors
    assert err.startswith(
        f"{y}: dynamic table lake.db.x: freshness: downstream needs an upstream dynamic table"
    )
    assert err.endswith("dynamic tables: lake.db.daily")


def test_downstream_of_a_broken_upstream_is_not_blamed_for_it() -> None:
    broken = DAILY.replace("1 DAY", "7 MINUTE")
    loaded = parse_declarations_text(CATALOG + "dynamic-tables:\n" + broken + WEEKLY, "t.yaml")
    from airflow_tablemgmt.declarations.checks import check_dynamic_tables

    check_dynamic_tables([loaded])
    assert [d.id for d in loaded.dynamic_tables] == ["lake.db.weekly"]
    assert len(loaded.errors) == 1 and "7 MINUTE" in loaded.errors[0].message


# --- sync into the store -------------------------------------------------------------------------


def test_sync_creates_code_owned_creating_tables_once(store: Store, tmp_path: Path) -> None:
    y = tmp_path / "tables.yaml"
    y.write_text(DOC)
    result = load_registry_and_build(y, store=store)
    assert result.errors == []
    assert {REFRESH_DAILY, REFRESH_WEEKLY, "tms__lake.db.events__expire-snapshots"} <= set(result.dags)
    daily = store.dynamic.get("lake.db.daily")
    assert (str(daily.state), daily.managed_by) == ("CREATING", Owner.CODE)
    assert daily.definition == parse_declarations_text(DOC, "t").dynamic_tables[0]
    assert store.tables.get("lake.db.weekly").action_settings("refresh").upstream == ["lake.db.daily"]
    before = {r.table_id: r.updated_at for r in store.tables.list()}
    load_registry_and_build(y, store=store)  # unchanged file: no write
    y.write_text(DOC + "# a comment changes the bytes, not the declarations\n")
    load_registry_and_build(y, store=store)
    assert {r.table_id: r.updated_at for r in store.tables.list()} == before


def test_creation_results_survive_the_next_parse(store: Store, tmp_path: Path) -> None:
    """Spark fills schema and source-tables at creation; the YAML entry does not carry them."""
    y = tmp_path / "tables.yaml"
    y.write_text(DOC)
    load_registry_and_build(y, store=store)
    dt = store.dynamic.get("lake.db.daily")
    created = DynamicTableSpec.model_validate(
        {
            **dt.definition.model_dump(by_alias=True),
            "schema": [{"name": "day", "type": "date"}],
            "source-tables": ["lake.db.events"],
        }
    )
    store.dynamic.upsert(created, Owner.CODE)
    store.dynamic.set_state("lake.db.daily", "ACTIVE")
    y.write_text(DOC.replace("1 DAY", "12 HOUR"))  # a real change
    result = load_registry_and_build(y, store=store)
    assert result.errors == []
    after = store.dynamic.get("lake.db.daily")
    assert str(after.definition.freshness) == "12 HOUR" and str(after.state) == "ACTIVE"
    assert after.definition.columns is not None and after.definition.source_tables == ["lake.db.events"]
    assert store.tables.get("lake.db.daily").action_settings("refresh").interval == "0 */12 * * *"
    # A changed query keeps the schema (the refresh checks it) but not the old source tables.
    y.write_text(DOC.replace("1 DAY", "12 HOUR").replace("count(*) AS n", "count(1) AS n"))
    load_registry_and_build(y, store=store)
    again = store.dynamic.get("lake.db.daily")
    assert again.definition.columns is not None and again.definition.source_tables is None


def test_a_plain_store_table_of_that_id_is_reported_and_kept(store: Store, tmp_path: Path) -> None:
    from airflow_tablemgmt.core.tables import TableSpec

    store.tables.upsert(TableSpec(catalog="lake", namespace="db", name="daily"), Owner.STORE)
    y = tmp_path / "tables.yaml"
    y.write_text(CATALOG + "dynamic-tables:\n" + DAILY)
    result = load_registry_and_build(y, store=store)
    assert any("dynamic table lake.db.daily:" in e and "plain table" in e for e in result.errors), (
        result.errors
    )
    assert store.dynamic.find("lake.db.daily") is None and store.tables.get("lake.db.daily").actions == {}


def test_pruning_follows_the_tables_rules(store: Store, tmp_path: Path) -> None:
    y = tmp_path / "tables.yaml"
    y.write_text(DOC)
    load_registry_and_build(y, store=store)
    # A broken file, an empty file, a missing file: nothing is pruned, the refresh DAGs stay.
    for content in (DOC + "dynamic-tables: [\n", "", None):
        if content is None:
            y.unlink()
        else:
            y.write_text(content)
        result = load_registry_and_build(y, store=store)
        assert {REFRESH_DAILY, REFRESH_WEEKLY} <= set(result.dags), content
        assert {d.id for d in store.dynamic.list()} == {"lake.db.daily", "lake.db.weekly"}
    # A clean file that no longer lists one: that one goes.
    y.write_text(CATALOG + "dynamic-tables:\n" + DAILY)
    result = load_registry_and_build(y, store=store)
    assert {d.id for d in store.dynamic.list()} == {"lake.db.daily"}
    assert REFRESH_WEEKLY not in result.dags and REFRESH_DAILY in result.dags


def test_apply_checks_against_the_store_and_syncs(store: Store, tmp_path: Path) -> None:
    loaded = parse_declarations_text(DOC, "t.yaml")
    report = apply_declarations(store, loaded)
    assert sorted(report.created) == ["lake.db.daily", "lake.db.events", "lake.db.weekly"]
    assert store.dynamic.get("lake.db.weekly").managed_by == Owner.CODE
    assert store.tables.get("lake.db.events").enabled_actions() == ["expire-snapshots"]
    assert sorted(apply_declarations(store, parse_declarations_text(DOC, "t.yaml")).unchanged) == [
        "lake.db.daily",
        "lake.db.events",
        "lake.db.weekly",
    ]
    bad = (
        CATALOG
        + "dynamic-tables:\n  - {identifier: lake.db.z, query: SELECT * FROM lake.db.q, freshness: downstream}\n"
    )
    with pytest.raises(InvalidDeclaration, match="lake.db.z: freshness: downstream needs an upstream"):
        apply_declarations(store, parse_declarations_text(bad, "t.yaml"))
    assert store.dynamic.find("lake.db.z") is None


def test_the_commented_example_in_the_shipped_tables_yaml_validates() -> None:
    from airflow_tablemgmt.declarations.checks import check_dynamic_tables

    text = (Path(__file__).resolve().parents[3] / "dags" / "tables.yaml").read_text()
    block = text[text.index("# dynamic-tables:") :]
    uncommented = "\n".join(line[2:] if line.startswith("# ") else line for line in block.splitlines())
    loaded = parse_declarations_text(CATALOG + uncommented + "\n", "tables.yaml")
    check_dynamic_tables([loaded])
    assert loaded.errors == []
    assert [d.id for d in loaded.dynamic_tables] == ["lake.sales.daily_orders", "lake.sales.weekly_orders"]
