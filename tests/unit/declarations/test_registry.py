"""Declarations split across tables.yaml and tables.d/*.yaml, and the per-file sync record: a file
unchanged since its sync is not re-read, an entry reuses its stored spec only when its digest is
unchanged, every changed entry is validated with today's messages, pruning is per file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_tablemgmt.core.naming import BROKEN_DAG_ID
from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build
from airflow_tablemgmt.declarations import parse as declarations
from airflow_tablemgmt.declarations.parse import entry_digest, parse_declarations_text
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.declaration_files import DeclarationFileRepository

CATALOG = "catalogs: [{name: lake, warehouse: /data/wh}]\n"


def table(name: str, settings: str = "{}") -> str:
    return f"  - {{catalog: lake, namespace: s, name: {name}, actions: {{expire-snapshots: {settings}}}}}\n"


def dag(name: str) -> str:
    return f"tms__lake.s.{name}__expire-snapshots"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


@pytest.fixture
def dags(tmp_path: Path) -> Path:
    d = tmp_path / "dags"
    (d / "tables.d").mkdir(parents=True)
    (d / "tables.yaml").write_text(CATALOG + "tables:\n" + table("core1"))
    (d / "tables.d" / "team_a.yaml").write_text("tables:\n" + table("a1") + table("a2"))
    (d / "tables.d" / "team_b.yaml").write_text("tables:\n" + table("b1"))
    return d / "tables.yaml"


def live(store: Store) -> list[str]:
    return [t.table_id for t in store.tables.list()]


class CountValidations:
    """Counts validations of YAML entries (the declarations module's own calls, not store reads)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        counter = self

        class Counting:
            @staticmethod
            def model_validate(raw: object, *a: object, **k: object) -> TableSpec:
                counter.calls += 1
                return TableSpec.model_validate(raw, *a, **k)

        monkeypatch.setattr(declarations, "TableSpec", Counting)


class CountYamlLoads:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = declarations.yaml.load

        def counting(*a: object, **k: object) -> object:
            self.calls += 1
            return real(*a, **k)

        monkeypatch.setattr(declarations.yaml, "load", counting)


def test_tables_d_files_load_beside_tables_yaml_and_may_use_its_catalogs(store: Store, dags: Path) -> None:
    result = load_registry_and_build(dags, store=store)
    assert {dag("core1"), dag("a1"), dag("a2"), dag("b1")} <= set(result.dags)
    assert BROKEN_DAG_ID not in result.dags
    assert live(store) == ["lake.s.a1", "lake.s.a2", "lake.s.b1", "lake.s.core1"]


def test_a_broken_file_is_reported_by_file_and_the_other_files_load(store: Store, dags: Path) -> None:
    team_b = dags.parent / "tables.d" / "team_b.yaml"
    team_b.write_text("tables: [\n")
    result = load_registry_and_build(dags, store=store)
    assert {dag("core1"), dag("a1"), dag("a2")} <= set(result.dags)
    assert any(str(team_b) in e and "not valid YAML" in e for e in result.errors)


def test_a_broken_entry_is_reported_by_file_and_table(store: Store, dags: Path) -> None:
    team_a = dags.parent / "tables.d" / "team_a.yaml"
    team_a.write_text("tables:\n" + table("a1") + table("a2", "{older-than: 30}"))
    result = load_registry_and_build(dags, store=store)
    assert dag("a1") in result.dags and dag("b1") in result.dags
    assert any(e.startswith(str(team_a)) and "lake.s.a2" in e and "'30d'" in e for e in result.errors)


def test_a_table_moved_between_files_is_not_pruned(store: Store, dags: Path) -> None:
    load_registry_and_build(dags, store=store)
    team_a = dags.parent / "tables.d" / "team_a.yaml"
    team_b = dags.parent / "tables.d" / "team_b.yaml"
    team_a.write_text("tables:\n" + table("a1"))
    team_b.write_text("tables:\n" + table("b1") + table("a2"))
    result = load_registry_and_build(dags, store=store)
    assert dag("a2") in result.dags
    assert live(store) == ["lake.s.a1", "lake.s.a2", "lake.s.b1", "lake.s.core1"]
    # ... and a table dropped from a clean team file is pruned, the other teams' tables are not.
    team_b.write_text("tables:\n" + table("b1"))
    result = load_registry_and_build(dags, store=store)
    assert live(store) == ["lake.s.a1", "lake.s.b1", "lake.s.core1"]
    assert dag("a2") not in result.dags


def test_a_team_file_prunes_nothing_while_any_file_is_broken(store: Store, dags: Path) -> None:
    load_registry_and_build(dags, store=store)
    (dags.parent / "tables.d" / "team_a.yaml").write_text("tables:\n" + table("a1"))
    (dags.parent / "tables.d" / "team_b.yaml").write_text("tables: [\n")  # a2 may have moved here
    load_registry_and_build(dags, store=store)
    assert "lake.s.a2" in live(store)


def test_a_missing_team_file_prunes_nothing(store: Store, dags: Path) -> None:
    load_registry_and_build(dags, store=store)
    (dags.parent / "tables.d" / "team_b.yaml").unlink()
    result = load_registry_and_build(dags, store=store)
    assert "lake.s.b1" in live(store) and dag("b1") in result.dags


def test_a_table_declared_in_two_files_is_an_error_of_the_later_file(store: Store, dags: Path) -> None:
    team_b = dags.parent / "tables.d" / "team_b.yaml"
    team_b.write_text("tables:\n" + table("b1") + table("a1"))
    result = load_registry_and_build(dags, store=store)
    assert any(
        e.startswith(str(team_b)) and "lake.s.a1" in e and "declared twice, also in" in e
        for e in result.errors
    )
    assert dag("a1") in result.dags and dag("b1") in result.dags


def test_an_unchanged_file_is_not_read_as_yaml_again(
    store: Store, dags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = load_registry_and_build(dags, store=store)
    loads = CountYamlLoads(monkeypatch)
    validations = CountValidations(monkeypatch)
    again = load_registry_and_build(dags, store=store)
    assert loads.calls == 0 and validations.calls == 0
    assert set(again.dags) == set(first.dags)


def test_an_edited_entry_is_validated_again_and_only_it(
    store: Store, dags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_registry_and_build(dags, store=store)
    team_a = dags.parent / "tables.d" / "team_a.yaml"
    team_a.write_text("tables:\n" + table("a1") + table("a2", "{retain-last: 7}"))
    validations = CountValidations(monkeypatch)
    result = load_registry_and_build(dags, store=store)
    assert validations.calls == 1  # a2 only; a1 reuses its stored spec
    assert store.tables.get("lake.s.a2").actions["expire-snapshots"]["retain-last"] == 7
    assert dag("a2") in result.dags


def test_an_edit_that_breaks_an_entry_reports_todays_message(store: Store, dags: Path) -> None:
    load_registry_and_build(dags, store=store)
    team_a = dags.parent / "tables.d" / "team_a.yaml"
    team_a.write_text("tables:\n" + table("a1") + table("a2", "{older-than: 30}"))
    result = load_registry_and_build(dags, store=store)
    expected = parse_declarations_text(CATALOG + "tables:\n" + table("a2", "{older-than: 30}"), str(team_a))
    assert [e.message.replace("tables[0]", "tables[1]") for e in expected.errors] == [
        e for e in result.errors if "lake.s.a2" in e
    ]
    # The row keeps its last valid declaration, and the broken file prunes nothing.
    assert "lake.s.a2" in live(store)
    # Unchanged and still broken: the same error comes from the record, without re-reading.
    again = load_registry_and_build(dags, store=store)
    assert [e for e in again.errors if "lake.s.a2" in e] == [e for e in result.errors if "lake.s.a2" in e]


def test_a_row_changed_since_the_sync_is_not_reused(
    store: Store, dags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_registry_and_build(dags, store=store)
    # Another writer (e.g. `tablemgmt apply` of another copy) changes a code-owned row.
    other = TableSpec.model_validate(
        {
            "catalog": "lake",
            "namespace": "s",
            "name": "a1",
            "actions": {"expire-snapshots": {"retain-last": 9}},
        }
    )
    store.tables.upsert(other, Owner.CODE)
    validations = CountValidations(monkeypatch)
    load_registry_and_build(dags, store=store)
    assert validations.calls >= 1
    # The file wins again.
    assert store.tables.get("lake.s.a1").actions["expire-snapshots"].get("retain-last") != 9


def test_a_change_of_validating_code_invalidates_every_record(
    store: Store, dags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_registry_and_build(dags, store=store)
    monkeypatch.setattr(
        "airflow_tablemgmt.declarations.registry.validation_fingerprint", lambda: "another version"
    )
    validations = CountValidations(monkeypatch)
    load_registry_and_build(dags, store=store)
    assert validations.calls == 4


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"n": 1}, {"n": 1.0}),
        ({"n": 1}, {"n": True}),
        ({"n": 1}, {"n": "1"}),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        ({"x": None}, {"x": "null"}),
        ({"x": [1, 2]}, {"x": [2, 1]}),
        ({"x": "a,b"}, {"x": ["a", "b"]}),
        ({1: "x"}, {"1": "x"}),
    ],
)
def test_entry_digest_tells_apart_inputs_validation_would_tell_apart(a: object, b: object) -> None:
    assert entry_digest(a) != entry_digest(b)
    assert entry_digest(a) == entry_digest(a)


def test_any_change_of_an_entry_text_changes_its_digest() -> None:
    base = CATALOG + "tables:\n" + table("t", "{retain-last: 2, older-than: 5d}")
    variants = [
        base.replace("retain-last: 2", "retain-last: 3"),
        base.replace("5d", "6d"),
        base.replace("name: t", "name: u"),
        base.replace("retain-last: 2, ", ""),
        base.replace("older-than: 5d", "older-than: 5d, retries: 1"),
    ]
    digest = parse_declarations_text(base, "t.yaml").entry_digests
    for v in variants:
        assert parse_declarations_text(v, "t.yaml").entry_digests != digest, v


def test_a_value_taken_through_an_alias_changes_the_digest_with_its_anchor() -> None:
    # An anchor in one entry, an alias in the next:
    doc = (
        CATALOG
        + "tables:\n  - {catalog: lake, namespace: s, name: t, actions: {expire-snapshots: &d {retain-last: 2}}}\n"
        + "  - {catalog: lake, namespace: s, name: u, actions: {expire-snapshots: *d}}\n"
    )
    changed = doc.replace("retain-last: 2", "retain-last: 3")
    before = parse_declarations_text(doc, "t.yaml").entry_digests["lake.s.u"]
    after = parse_declarations_text(changed, "t.yaml").entry_digests["lake.s.u"]
    assert before != after  # u's own text did not change, its value did


def test_a_task_start_reads_no_yaml_when_the_files_are_in_sync(
    store: Store, dags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_registry_and_build(dags, store=store)
    loads = CountYamlLoads(monkeypatch)
    result = load_registry_and_build(dags, store=store, only_dag_id=dag("a2"))
    assert list(result.dags) == [dag("a2")] and loads.calls == 0


def test_a_task_start_after_an_edit_builds_from_the_file(store: Store, dags: Path) -> None:
    load_registry_and_build(dags, store=store)
    team_a = dags.parent / "tables.d" / "team_a.yaml"
    team_a.write_text("tables:\n" + table("a1") + table("a2", "{retain-last: 7}"))
    result = load_registry_and_build(dags, store=store, only_dag_id=dag("a2"))
    assert list(result.dags) == [dag("a2")]
    assert "retain-last': 7" in (result.dags[dag("a2")].doc_md or "")
    assert store.tables.get("lake.s.a2").actions["expire-snapshots"].get("retain-last") != 7  # no write


def test_records_name_each_file(store: Store, dags: Path) -> None:
    load_registry_and_build(dags, store=store)
    records = DeclarationFileRepository(store.engine).all()
    team_a = str(dags.parent / "tables.d" / "team_a.yaml")
    assert set(records) == {str(dags), team_a, str(dags.parent / "tables.d" / "team_b.yaml")}
    assert sorted(records[team_a].entries) == ["lake.s.a1", "lake.s.a2"]


def test_a_team_file_applied_on_its_own_may_use_the_catalogs_of_its_set(store: Store, dags: Path) -> None:
    from airflow_tablemgmt.declarations.files import load_declarations
    from airflow_tablemgmt.declarations.sync import apply_declarations

    loaded = load_declarations(dags.parent / "tables.d" / "team_a.yaml")
    assert loaded.errors == [] and [t.id for t in loaded.tables] == ["lake.s.a1", "lake.s.a2"]
    store.catalogs.upsert(load_declarations(dags).catalogs[0], Owner.CODE)
    assert apply_declarations(store, loaded).created == ["lake.s.a1", "lake.s.a2"]


def test_apply_prune_of_a_team_file_leaves_the_other_files_tables(store: Store, dags: Path) -> None:
    from airflow_tablemgmt.declarations.files import load_declarations
    from airflow_tablemgmt.declarations.sync import apply_declarations

    load_registry_and_build(dags, store=store)
    team_a = dags.parent / "tables.d" / "team_a.yaml"
    team_a.write_text("tables:\n" + table("a1"))
    report = apply_declarations(store, load_declarations(team_a), prune=True)
    assert report.removed == ["lake.s.a2"]
    assert live(store) == ["lake.s.a1", "lake.s.b1", "lake.s.core1"]


def test_a_task_start_after_an_edit_loads_only_the_edited_file(
    store: Store, dags: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_registry_and_build(dags, store=store)
    (dags.parent / "tables.d" / "team_b.yaml").write_text("tables:\n" + table("b1", "{retain-last: 4}"))
    loads = CountYamlLoads(monkeypatch)
    edited = load_registry_and_build(dags, store=store, only_dag_id=dag("b1"))
    assert "retain-last': 4" in (edited.dags[dag("b1")].doc_md or "") and loads.calls == 1
    untouched = load_registry_and_build(dags, store=store, only_dag_id=dag("a1"))
    assert list(untouched.dags) == [dag("a1")] and loads.calls == 2  # team_b only, again
