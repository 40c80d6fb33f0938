"""``policies:`` in declarations files (declarations/policies.py) through the one sync path (declarations/sync.py):
each entry validated on its own, declared once across the set, owned by its file, pruned on the same evidence
as tables, and the DAG file's parse and ``tablemgmt apply`` treat them alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.declarations.files import load_declarations
from airflow_tablemgmt.declarations.parse import parse_declarations_text
from airflow_tablemgmt.declarations.registry import load_files
from airflow_tablemgmt.declarations.sync import PrunePolicy, apply_declarations, sync
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.policies import PolicyManagedByCode, PolicyRepository

CATALOG = "catalogs: [{name: lake, warehouse: /data/wh}]\ntables: [{catalog: lake, namespace: s, name: t}]\n"


def doc(*names: str, retain: int = 3) -> str:
    rows = "".join(
        f"  - {{name: {n}, match: {{catalog: lake, namespace: 'sales.*', format: iceberg}}, "
        f"actions: {{rewrite-manifests: {{}}, expire-snapshots: {{retain-last: {retain}}}}}}}\n"
        for n in names
    )
    return CATALOG + ("policies:\n" + rows if names else "policies: []\n")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


def names(store: Store) -> list[str]:
    return [p.name for p in PolicyRepository.of(store).list()]


def parse_sync(store: Store, y: Path):  # type: ignore[no-untyped-def]
    """The DAG file's sync: the registry snapshot, the files, PrunePolicy.PARSE, records written."""
    rows, _ = store.tables.list_with_errors()
    registered = {r.spec.id: r for r in rows}
    catalogs = {c.name: c for c in store.catalogs.list_with_errors()[0]}
    fs = load_files(y, store, registered, catalogs)
    return sync(store, fs, prune=PrunePolicy.PARSE, registered=registered, record=True)


def test_a_bad_entry_names_its_path_field_value_and_the_others_load() -> None:
    text = CATALOG + (
        "policies:\n"
        "  - {name: good, match: {catalog: lake}}\n"
        "  - {name: bad, match: {catalog: lake}, actions: {expire-snapshots: {retain-last: 0}}}\n"
        "  - {name: good}\n"
    )
    loaded = parse_declarations_text(text, "dags/tables.yaml")
    assert [p.name for p in loaded.policies] == ["good"]
    assert [e.message for e in loaded.errors] == [
        "dags/tables.yaml: policies[1].actions.expire-snapshots.retain-last (policy bad): Input should be "
        "greater than or equal to 1, got 0"
        + (" (for iceberg tables; narrow match.format to the formats it is meant for)"),
        "dags/tables.yaml: policies[2] (policy good): declared twice",
    ]
    assert not loaded.may_prune()  # an error in the file: it prunes nothing


def test_policies_must_be_a_list() -> None:
    loaded = parse_declarations_text("policies: {name: x}\n", "t.yaml")
    assert [e.message for e in loaded.errors] == ["t.yaml: policies: expected a list of policies, got dict"]


def test_apply_creates_updates_and_prunes_only_on_evidence(store: Store, tmp_path: Path) -> None:
    y = tmp_path / "tables.yaml"
    y.write_text(doc("a", "b"))
    report = apply_declarations(store, load_declarations(y))
    assert report.policies == ["a created", "b created"]
    assert "policies: a created, b created" in str(report)
    stored = PolicyRepository.of(store).get("a")
    assert (stored.managed_by, stored.source) == (Owner.CODE, str(y))
    y.write_text(doc("a", "b", retain=4))
    assert apply_declarations(store, load_declarations(y)).policies == ["a updated", "b updated"]
    y.write_text(doc("a", retain=4))
    assert apply_declarations(store, load_declarations(y), prune=False).policies == []
    assert apply_declarations(store, load_declarations(y)).policies == ["b removed"]
    y.write_text(doc())  # policies: [] prunes only when asked
    assert apply_declarations(store, load_declarations(y)).policies == []
    assert names(store) == ["a"]
    assert apply_declarations(store, load_declarations(y), allow_empty_prune=True).policies == ["a removed"]
    assert names(store) == []


def test_a_files_policy_refuses_rest_and_cli_and_a_file_without_policies_prunes_none(
    store: Store, tmp_path: Path
) -> None:
    y = tmp_path / "tables.yaml"
    y.write_text(doc("a"))
    parse_sync(store, y)
    repo = PolicyRepository.of(store)
    with pytest.raises(PolicyManagedByCode, match=f"policy a is declared in {y}"):
        repo.upsert(parse_policy({"name": "a"}), Owner.STORE)
    repo.upsert(parse_policy({"name": "by-rest"}), Owner.STORE)
    y.write_text(CATALOG)  # no policies: key at all: no evidence, nothing pruned
    assert parse_sync(store, y).policies == []
    assert names(store) == ["a", "by-rest"]
    y.write_text(doc("c"))  # a clean file listing policies prunes its own, never a store-owned one
    assert parse_sync(store, y).policies == ["c created", "a removed"]
    assert names(store) == ["by-rest", "c"]


def test_the_parse_declares_each_policy_once_across_files_and_records_unchanged_files(
    store: Store, tmp_path: Path
) -> None:
    y = tmp_path / "tables.yaml"
    team = tmp_path / "tables.d" / "team.yaml"
    team.parent.mkdir()
    y.write_text(doc("a"))
    team.write_text("policies:\n  - {name: t1, match: {catalog: lake, name: 'x*'}}\n")
    assert parse_sync(store, y).policies == ["a created", "t1 created"]
    assert parse_sync(store, y).policies == []  # unchanged files come from their records
    # the team file declares a too: an error of the later file, which then prunes nothing (t1 stays)
    team.write_text("policies:\n  - {name: a, match: {catalog: lake}}\n")
    report = parse_sync(store, y)
    assert report.policies == []
    assert names(store) == ["a", "t1"]
    assert PolicyRepository.of(store).get("a").source == str(y)
    # once the main file is unchanged (read from its record), the store still knows a is the main file's
    with pytest.raises(InvalidDeclaration, match=f"policy a: declared twice, also in {y}"):
        apply_declarations(store, load_declarations(team))
