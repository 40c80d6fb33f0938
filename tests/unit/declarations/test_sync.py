"""declarations/sync.py: one upsert/record/prune path, two policies. The DAG file's parse
(PrunePolicy.PARSE) never prunes on an explicit ``tables: []``; ``tablemgmt apply`` prunes on it only
with allow_empty; both prune a table dropped from a clean file, and neither touches store-owned rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.declarations.files import load_declarations
from airflow_tablemgmt.declarations.registry import load_files
from airflow_tablemgmt.declarations.sync import PrunePolicy, apply_declarations, sync
from airflow_tablemgmt.store import Store

CATALOG = "catalogs: [{name: lake, warehouse: /data/wh}]\n"


def doc(*names: str) -> str:
    rows = "".join(
        f"  - {{catalog: lake, namespace: s, name: {n}, actions: {{expire-snapshots: {{}}}}}}\n"
        for n in names
    )
    return CATALOG + ("tables:\n" + rows if names else "tables: []\n")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    s.tables.upsert(
        TableSpec.model_validate(
            {"catalog": "lake", "namespace": "s", "name": "from_cli", "actions": {"expire-snapshots": {}}}
        ),
        Owner.STORE,
    )
    yield s
    s.dispose()


def live(store: Store) -> list[str]:
    return sorted(t.spec.id for t in store.tables.list())


def parse_sync(store: Store, y: Path):  # type: ignore[no-untyped-def]
    """The DAG file's sync: the registry snapshot, the files, PrunePolicy.PARSE, records written."""
    rows, _ = store.tables.list_with_errors()
    registered = {r.spec.id: r for r in rows}
    catalogs = {c.name: c for c in store.catalogs.list_with_errors()[0]}
    fs = load_files(y, store, registered, catalogs)
    return sync(store, fs, prune=PrunePolicy.PARSE, registered=registered, record=True)


def test_the_parse_policy_prunes_a_dropped_table_but_never_on_an_empty_list(
    store: Store, tmp_path: Path
) -> None:
    y = tmp_path / "tables.yaml"
    y.write_text(doc("a", "b"))
    first = parse_sync(store, y)
    assert sorted(first.created) == ["lake.s.a", "lake.s.b"] and not first.errors
    y.write_text(doc("a"))
    assert parse_sync(store, y).removed == ["lake.s.b"]
    y.write_text(doc())
    assert parse_sync(store, y).removed == []
    assert live(store) == ["lake.s.a", "lake.s.from_cli"]


def test_the_apply_policy_prunes_an_empty_list_only_when_allowed(store: Store, tmp_path: Path) -> None:
    y = tmp_path / "tables.yaml"
    y.write_text(doc("a", "b"))
    assert sorted(apply_declarations(store, load_declarations(y)).created) == ["lake.s.a", "lake.s.b"]
    y.write_text(doc("a"))
    assert apply_declarations(store, load_declarations(y), prune=False).removed == []
    assert apply_declarations(store, load_declarations(y)).removed == ["lake.s.b"]
    y.write_text(doc())
    assert apply_declarations(store, load_declarations(y)).removed == []
    assert apply_declarations(store, load_declarations(y), allow_empty_prune=True).removed == ["lake.s.a"]
    assert live(store) == ["lake.s.from_cli"]


def test_policies() -> None:
    assert PrunePolicy.PARSE == PrunePolicy(enabled=True, allow_empty=False, warn_empty=True)
    assert PrunePolicy.apply(allow_empty=True).allow_empty and not PrunePolicy.apply().warn_empty
    assert not PrunePolicy.NEVER.enabled
